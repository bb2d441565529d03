"""Keys read and split on the host (``vijax._compile.host_key_data``, ``split_on_host``): the same
words as JAX's, keys of the parent's kind, and no program compiled for either."""

import subprocess
import sys

import jax
import numpy as np
import pytest

from vijax._compile import host_key_data, split_on_host


@pytest.mark.parametrize("make", [jax.random.PRNGKey, jax.random.key], ids=["raw", "typed"])
def test_host_key_data_is_the_keys_words(make):
    key = make(7)
    words = host_key_data(key)
    assert words.dtype == np.uint32
    np.testing.assert_array_equal(words, np.asarray(jax.random.key_data(key)))


@pytest.mark.parametrize("make", [jax.random.PRNGKey, jax.random.key], ids=["raw", "typed"])
def test_split_on_host_gives_keys_of_the_parents_kind(make):
    key = make(3)
    keys = split_on_host(key, 3)
    assert len(keys) == 3
    for k in keys:
        assert k.dtype == key.dtype and k.shape == key.shape
        if key.dtype != np.uint32:
            assert jax.random.key_impl(k) == jax.random.key_impl(key)
    words = [host_key_data(k).tobytes() for k in keys + [key]]
    assert len(set(words)) == 4  # distinct from each other and from the parent
    again = split_on_host(key, 3)
    for a, b in zip(keys, again):  # the same key gives the same keys
        np.testing.assert_array_equal(host_key_data(a), host_key_data(b))
    # usable keys: different draws from each
    draws = [float(jax.random.normal(k)) for k in keys]
    assert len(set(draws)) == 3


def test_reading_and_splitting_a_key_on_the_host_compile_nothing():
    """In a fresh process (where JAX has compiled nothing yet), ``host_key_data`` and
    ``split_on_host`` compile no program, where ``jax.random.split`` and the unpacking of its
    result compile one each."""
    code = (
        "import jax, numpy as np\n"
        "from jax import monitoring\n"
        "from vijax._compile import host_key_data, split_on_host\n"
        "n = [0]\n"
        "monitoring.register_event_duration_secs_listener("
        "lambda name, d, **kw: n.__setitem__(0, n[0] + ('backend_compile' in name)))\n"
        "words = np.asarray([0, 7], np.uint32)\n"
        "raw, typed = jax.device_put(words), jax.random.wrap_key_data(words)\n"
        "host_key_data(raw); host_key_data(typed); split_on_host(raw, 2); split_on_host(typed, 2)\n"
        "ours = n[0]\n"
        "a, b = jax.random.split(raw)\n"
        "print(ours, n[0] - ours)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "2"], out
