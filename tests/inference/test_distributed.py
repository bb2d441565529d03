"""Data parallelism across processes: two local CPU processes (JAX's gloo CPU collectives), each
reading its own half of the corpus, give the one-process result (SVI on LDA, 6 steps), and a bad
batch in one of them stops both with the same located error."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from vijax.inference import global_batch, initialize_processes, process_shard
from vijax.models import LDA

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_process_shard_blocks_cover_the_items_once():
    blocks = [list(process_shard(11, p, 3)) for p in range(3)]
    assert blocks == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    with pytest.raises(ValueError, match="process_index"):
        process_shard(5, 2, 2)
    assert list(process_shard(7)) == list(range(7))  # one process reads everything
    with pytest.raises(ValueError, match="process_id"):
        initialize_processes("localhost:1", 2, 2)
    with pytest.raises(ValueError, match="num_processes"):
        initialize_processes("localhost:1", 0, 0)
    with pytest.raises(ValueError, match="data_parallel"):
        global_batch(LDA(2, 5), np.zeros((2, 3)))


def _run_processes(tmp_path, runs, *extra) -> list:
    """Runs ``_mp_worker.py`` once per (num_processes, process_id) of ``runs``, side by side;
    returns each process's return code and output."""
    port, root = _free_port(), os.path.dirname(os.path.dirname(HERE))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_mp_worker.py"), str(port), str(n), str(p)]
            + [str(tmp_path / f"{n}_{p}.npz"), *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n, p in runs
    ]
    outs = []
    for p in procs:
        try:
            outs.append((p.communicate(timeout=180)[0], p.returncode))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the multi-process run did not finish in 180 s")
    return outs


@pytest.mark.slow
def test_two_cpu_processes_equal_one(tmp_path):
    runs = [(2, 0), (2, 1), (1, 0)]  # two processes, and the one-process reference (in float32 alike)
    outs = _run_processes(tmp_path, runs)
    for out, code in outs:
        assert code == 0, out
    assert "process 0 of 2" in outs[0][0] and "process 1 of 2" in outs[1][0]
    ref = np.load(tmp_path / "1_0.npz")
    for p in range(2):
        got = np.load(tmp_path / f"2_{p}.npz")
        assert len(got.files) == len(ref.files) > 1
        # the psum adds two partial sums where one process adds all terms at once: float32 rounding
        for name in ref.files:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.slow  # two JAX processes (about 20 s); the same check runs in one process in test_runner.py
def test_a_bad_batch_in_one_process_stops_every_process_at_its_step(tmp_path):
    """Process 1 reads a negative count at step 5 (its first row: row 4 of the global batch of 8).
    Both processes raise the same located error, the global row and the step named, and neither
    writes a result."""
    outs = _run_processes(tmp_path, [(2, 0), (2, 1)], "bad")
    for p, (out, code) in enumerate(outs):
        assert code != 0, out
        assert "ValueError: batch count -1.0 at [4, 0] is not a finite number >= 0 (in step 5)" in out, out
        assert not (tmp_path / f"2_{p}.npz").exists()
