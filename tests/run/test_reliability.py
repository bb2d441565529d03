"""Reliability of runs: checksummed checkpoints with fallback past a corrupt newest one, resume
refused on a changed config (fingerprint), non-finite ELBOs and rejected steps reported with
their step numbers and turned into exit status 3, and one-line errors naming the config key."""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.run.test_cli import write_config
from tests.run.test_config import TOY
from tests.run.test_runner import SEED, assert_results_identical, toy_algorithm, toy_batch_fn
from vijax.inference import VIAlgorithm
from vijax.run import Experiment, main, register_experiment, run
from vijax.run import _checkpoint
from vijax.run._cli import EXIT_CANNOT_START, EXIT_UNTRUSTED
from vijax.run._config import config_fingerprint, load_config
from vijax.run import RunConfig, run_health

KW = dict(batch_fn=toy_batch_fn(), chunk_size=10, checkpoint_every=20, progress=False)


def _two_checkpoints(tmp_path):
    ckpt = str(tmp_path / "ck")
    key = jax.random.PRNGKey(SEED)
    run(toy_algorithm(), key, num_steps=100, checkpoint_dir=ckpt, **KW)
    assert [s for s, _ in _checkpoint.list_checkpoints(ckpt)] == [80, 100]
    return ckpt, key


@pytest.mark.parametrize("damage", ["truncate", "garbage", "tamper"])
def test_corrupt_newest_checkpoint_is_named_and_the_previous_one_used(tmp_path, damage):
    ckpt, key = _two_checkpoints(tmp_path)
    full = run(toy_algorithm(), key, num_steps=120, **{k: v for k, v in KW.items() if k != "checkpoint_every"})
    newest = _checkpoint.checkpoint_path(ckpt, 100)
    data = open(newest, "rb").read()
    if damage == "truncate":
        open(newest, "wb").write(data[: len(data) // 2])
    elif damage == "garbage":
        open(newest, "wb").write(b"\0" * len(data))
    else:  # a valid zip whose state was changed: only the checksum notices
        with np.load(newest) as f:
            arrays = {k: f[k] for k in f.files}
        arrays["state/0"] = arrays["state/0"] + 1.0
        np.savez(newest, **arrays)
    with pytest.raises(_checkpoint.CorruptCheckpointError, match="ckpt_0000000100.npz is corrupt"):
        _checkpoint.load_checkpoint(newest, toy_algorithm().init(key))
    with pytest.warns(RuntimeWarning, match=r"ckpt_0000000100\.npz is corrupt.*previous checkpoint is used"):
        resumed = run(toy_algorithm(), key, num_steps=120, checkpoint_dir=ckpt, resume=True, **KW)
    assert_results_identical(full, resumed)  # from step 80, bit-identical
    assert os.path.exists(newest + ".corrupt")
    assert [s for s, _ in _checkpoint.list_checkpoints(ckpt)] == [100, 120]


def test_no_intact_checkpoint_is_an_error_naming_the_files(tmp_path):
    ckpt, key = _two_checkpoints(tmp_path)
    for _, path in _checkpoint.list_checkpoints(ckpt):
        open(path, "wb").write(b"not a zip")
    with (
        pytest.warns(RuntimeWarning),
        pytest.raises(
            _checkpoint.CheckpointError,
            match=r"no intact checkpoint"
            r".*ckpt_0000000100\.npz.*ckpt_0000000080\.npz",
        ),
    ):
        run(toy_algorithm(), key, num_steps=120, checkpoint_dir=ckpt, resume=True, **KW)


def test_checkpoint_checksum_and_directory_fsync(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (synced.append(os.path.isdir(f"/proc/self/fd/{fd}")), real_fsync(fd))[1]
    )
    path = _checkpoint.save_checkpoint(
        str(tmp_path),
        3,
        {"a": jnp.arange(4.0)},
        {"step": np.arange(1, 4)},
        [],
        wall_time=1.0,
        key_data=np.zeros(2, np.uint32),
        fingerprint={"hash": "h", "values": {"x": 1}},
    )
    with np.load(path) as f:
        assert len(str(f["__checksum__"])) == 64
    umask = os.umask(0o022)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask  # as any tool's output (mkstemp's would be 0600)
    if os.path.isdir("/proc/self/fd"):
        assert synced[-2:] == [False, True]  # the file, then the folder after the rename
    ck = _checkpoint.load_checkpoint(path, {"a": jnp.zeros(4)})
    assert ck.fingerprint == {"hash": "h", "values": {"x": 1}} and ck.step == 3


def test_fingerprint_refuses_a_changed_config_and_allow_changes_accepts_it(tmp_path):
    ckpt, key = str(tmp_path / "ck"), jax.random.PRNGKey(SEED)
    a = {"hash": "a", "values": {"data.center": 1.5, "run.num_steps": 40}}
    b = {"hash": "b", "values": {"data.center": 0.5, "run.num_steps": 40}}
    run(toy_algorithm(), key, num_steps=40, checkpoint_dir=ckpt, fingerprint=a, **KW)
    with pytest.raises(_checkpoint.ConfigChangedError, match=r"changed: data\.center: 1\.5 -> 0\.5.*allow-changes"):
        run(toy_algorithm(), key, num_steps=60, checkpoint_dir=ckpt, resume=True, fingerprint=b, **KW)
    with pytest.warns(UserWarning, match=r"changed config values: data\.center"):
        res = run(
            toy_algorithm(),
            key,
            num_steps=60,
            checkpoint_dir=ckpt,
            resume=True,
            fingerprint=b,
            allow_changes=True,
            **KW,
        )
    assert res.num_steps == 60
    assert _checkpoint.load_checkpoint(_checkpoint.list_checkpoints(ckpt)[-1][1], res.state).fingerprint == b
    # the same fingerprint resumes silently
    run(toy_algorithm(), key, num_steps=80, checkpoint_dir=ckpt, resume=True, fingerprint=b, **KW)


def test_config_fingerprint_keys_and_data_file_identity(tmp_path):
    cfg = load_config({"experiment": TOY})
    fp = config_fingerprint(cfg)
    assert "data.center" in fp["values"] and "run.num_steps" in fp["values"]
    for ignored in ("output.dir", "run.progress", "run.eval_every", "run.checkpoint_every"):
        assert ignored not in fp["values"]
    cfg2 = dict(cfg, output={"dir": "elsewhere"}, run=dict(cfg["run"], progress=False))
    assert config_fingerprint(cfg2)["hash"] == fp["hash"]
    changed = _checkpoint.compare_fingerprints(fp, config_fingerprint(dict(cfg, seed=1)))
    assert changed == ["seed: 0 -> 1"]
    # a data file named in the data section is identified by its content
    data = tmp_path / "docs.txt"
    data.write_text("1 2 3\n")
    cfg3 = dict(cfg, data={"path": str(data)})
    one = config_fingerprint(cfg3)
    data.write_text("1 2 4\n")
    two = config_fingerprint(cfg3)
    assert [line.split(":")[0] for line in _checkpoint.compare_fingerprints(one, two)] == ["data_files.path"]


def test_cli_resume_with_a_changed_config_exits_2_naming_the_key(tmp_path, capsys):
    out = str(tmp_path / "out")
    args = ["run", write_config(tmp_path), "--out", out, "--no-progress", "--set", "run.num_steps=40"]
    assert main(args) == 0
    assert main(args + ["--resume", "--set", "data.center=0.25"]) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert err.startswith("vijax: error: checkpoint") and "data.center: 1.5 -> 0.25" in err
    assert "--allow-changes" in err and "Traceback" not in err
    with pytest.warns(UserWarning, match="data.center"):
        assert main(args + ["--resume", "--allow-changes", "--set", "data.center=0.25"]) == 0
    assert main(args + ["--allow-changes"]) == EXIT_CANNOT_START  # only with --resume


def test_cli_nan_elbo_exits_3_with_the_step(tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.warns(RuntimeWarning, match=r"ELBO is not finite at step 1 "):
        code = main(
            [
                "run",
                write_config(tmp_path),
                "--out",
                str(out),
                "--no-progress",
                "--set",
                "model.offset=.nan",
                "--set",
                "run.num_steps=40",
            ]
        )
    assert code == EXIT_UNTRUSTED
    err = capsys.readouterr().err
    assert "non-finite ELBO at step 40; first non-finite at step 1" in err
    metrics = json.loads((out / "metrics.json").read_text())  # the results are written all the same
    assert metrics["final_elbo"] is None and metrics["health"]["run"]["nonfinite_elbo_steps"] == 40


class _Info(NamedTuple):
    elbo: jax.Array
    accepted: jax.Array


REJECTING = "toy_rejecting"


@register_experiment(
    REJECTING,
    {"model": {}, "data": {}, "algorithm": {"reject_every": 2}},
    description="a toy whose steps t with t % reject_every != 0 are rejected",
)
def _build_rejecting(sections, seed):
    every = sections["algorithm"]["reject_every"]

    def step(key, state, batch):
        ok = state % every == 0
        return state + 1, _Info(jnp.where(ok, -1.0, jnp.nan), ok)

    alg = VIAlgorithm(init=lambda key, batch=None: jnp.zeros((), jnp.int32), step=step)
    return Experiment(algorithm=alg, init_state=alg.init, batch_fn=lambda k, t: None)


@pytest.mark.parametrize("every, share, code", [(2, 0.5, 0), (4, 0.7, EXIT_UNTRUSTED), (4, 0.8, 0)])
def test_cli_rejected_share_over_the_limit_exits_3(tmp_path, capsys, every, share, code):
    """Every ``every``-th update is applied: a rejected share of 1 - 1/every, against
    run.max_rejected_share = share; the rejected last step does not count as the final ELBO."""
    path = tmp_path / "c.yaml"
    path.write_text(
        f"experiment: {REJECTING}\nalgorithm: {{reject_every: {every}}}\n"
        f"run: {{num_steps: 20, chunk_size: 10, max_rejected_share: {share}}}\n"
    )
    with pytest.warns(RuntimeWarning, match="rejected as non-finite"):
        assert main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress"]) == code
    err = capsys.readouterr().err
    if code:
        assert "75.0% of the updates were rejected" in err and "first at step 2" in err
    else:
        assert err == ""
    metrics = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert metrics["final_elbo"] == -1.0 and metrics["final_elbo_mean"] == -1.0  # over the applied steps


def test_run_health_counts_steps():
    trace = {
        "step": np.arange(1, 7),
        "elbo": np.array([1.0, np.nan, 2.0, np.inf, 3.0, np.nan]),
        "accepted": np.array([True, False, True, True, True, False]),
    }
    h = run_health(trace)
    assert h.nonfinite_steps.tolist() == [2, 4, 6] and h.rejected_steps.tolist() == [2, 6]
    assert h.final_step == 5 and h.final_elbo_finite and h.rejected_share == pytest.approx(1 / 3)
    assert h.problems(0.5) == [] and "33.3%" in h.problems(0.2)[0]
    h = run_health({"step": np.arange(1, 4), "elbo": np.array([[1.0, 2.0], [1.0, np.nan], [np.nan, 1.0]])})
    assert h.nonfinite_steps.tolist() == [2, 3] and not h.final_elbo_finite
    assert h.problems() == ["the run ended with a non-finite ELBO at step 3; first non-finite at step 2"]
    with pytest.raises(ValueError, match="max_rejected_share: must lie in"):
        RunConfig(max_rejected_share=1.5)


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.num_components=0", "model.num_components must be an integer >= 1, got 0"),
        ("algorithm.rho_kappa=2.0", "algorithm.rho_kappa must be a finite number in (0.5, 1], got 2.0"),
        ("data.num_points=-3", "data.num_points must be an integer >= 1, got -3"),
    ],
)
def test_out_of_range_values_name_the_config_key(tmp_path, capsys, override, message):
    from vijax.run import import_builtin_experiments

    import_builtin_experiments()
    config = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "dp_bernoulli.yaml")
    code = main(
        [
            "run",
            config,
            "--out",
            str(tmp_path),
            "--no-progress",
            "--set",
            "run.num_steps=1",
            "--set",
            "run.chunk_size=1",
            "--set",
            override,
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_CANNOT_START and err == f"vijax: error: {message}\n"


def test_unwritable_out_is_one_line_and_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["run", write_config(tmp_path), "--out", str(blocker / "sub"), "--no-progress"]) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert err.startswith("vijax: error: output.dir (--out): cannot write the output folder") and err.count("\n") == 1


def test_cli_resume_with_another_seed_or_model_size_names_the_keys(tmp_path, capsys):
    out = str(tmp_path / "out")
    args = ["run", write_config(tmp_path), "--out", out, "--no-progress", "--set", "run.num_steps=40"]
    assert main(args) == 0
    assert main(args + ["--resume", "--set", "seed=2"]) == EXIT_CANNOT_START
    assert "changed: seed: 1 -> 2" in capsys.readouterr().err
    # another key even with --allow-changes: refused, one line, no traceback
    assert main(args + ["--resume", "--allow-changes", "--set", "seed=2"]) == EXIT_CANNOT_START
    assert "another key" in capsys.readouterr().err
    assert main(args + ["--resume", "--allow-changes", "--set", "model.dim=4"]) == EXIT_CANNOT_START
    err = capsys.readouterr().err
    assert "model.dim: 3 -> 4" in err and "another structure" in err and err.count("\n") == 1


def test_blame_picks_the_key_by_name_then_value():
    """The key comes from an ArgumentError's fields (name, then value between several); the text of
    any other error is never parsed: it is reported as the experiment's."""
    from vijax._validate import ArgumentError
    from vijax.run._cli import _blame

    cfg = {
        "experiment": "e",
        "model": {"num_components": 5, "prior": {"kappa": 0.3}},
        "data": {"num_components": 2},
        "algorithm": {"rho_kappa": 0.7},
    }
    assert _blame(ArgumentError("kappa", "kappa must lie in (0.5, 1]", 0.3), cfg).startswith("model.prior.kappa: ")
    assert _blame(ArgumentError("num_components", "num_components bad", 2), cfg).startswith("data.num_components: ")
    generic = "invalid config for experiment 'e': "
    assert _blame(ArgumentError("num_components", "num_components bad", 9), cfg).startswith(generic)
    assert _blame(ValueError("kappa must lie in (0.5, 1], got 0.3"), cfg).startswith(generic)
    assert _blame(ValueError("model.x: already named"), cfg) == "model.x: already named"


def test_blame_reads_an_argument_error_from_its_fields_not_its_text():
    """An ArgumentError names its argument and value as data: the key is found from them even where
    the message's first word is not the argument, and the value decides between two keys."""
    from vijax._validate import ArgumentError
    from vijax.run._cli import _blame

    cfg = {"experiment": "e", "model": {"prior": {"kappa": 0.3}}, "algorithm": {"kappa": 0.7}, "data": {}}
    for section in ("run", "output"):
        cfg[section] = {}
    err = ArgumentError("kappa", "the decay exponent must lie in (0.5, 1], got 0.3", 0.3)
    assert _blame(err, cfg).startswith("model.prior.kappa: the decay exponent")
    assert _blame(ArgumentError("kappa", "too big", 0.7), cfg).startswith("algorithm.kappa: ")
    assert _blame(ArgumentError("kappa", "bad", 0.5), cfg).startswith("invalid config for experiment 'e': ")


# ----------------------------------------------------------------------------- a folder per run
_HOLD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("lock", sys.argv[1])
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)
with lock.hold_folder(sys.argv[2], "folder"):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it, or kills this process
"""


def _holder(folder):
    """Another process holding ``folder`` with ``vijax.run._lock`` (loaded alone: a quick start)."""
    import subprocess
    import sys

    from vijax.run import _lock

    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, _lock.__file__, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "held\n"
    return proc


def test_a_run_into_a_folder_another_run_holds_fails_at_once_naming_it_and_the_pid(tmp_path):
    """silent-bad before: two runs wrote one folder, each rotating the other's checkpoints. The
    second one now fails before anything runs; a holder killed with SIGKILL leaves the folder free."""
    import signal
    import socket

    ckpt = tmp_path / "ck"
    holder = _holder(ckpt)
    calls = []
    base = toy_algorithm()
    alg = base._replace(init=lambda key, batch=None: calls.append(1) or base.init(key))
    message = (
        f"checkpoint_dir: the folder {str(ckpt)!r} is in use by another vijax run (pid {holder.pid} on "
        f"{socket.gethostname()}); wait until it ends or choose another folder"
    )
    try:
        with pytest.raises(ValueError) as e:
            run(alg, jax.random.PRNGKey(SEED), num_steps=20, checkpoint_dir=str(ckpt), **KW)
        assert str(e.value) == message and calls == []
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    res = run(alg, jax.random.PRNGKey(SEED), num_steps=20, checkpoint_dir=str(ckpt), **KW)
    assert res.num_steps == 20 and [s for s, _ in _checkpoint.list_checkpoints(ckpt)] == [20]


def test_cli_into_an_out_another_run_holds_exits_2_and_writes_nothing(tmp_path, capsys):
    """silent-bad before: config.yaml of one run beside metrics.json and checkpoints of another."""
    import socket

    out = tmp_path / "out"
    holder = _holder(out)
    try:
        code = main(["run", write_config(tmp_path), "--out", str(out), "--no-progress"])
    finally:
        holder.stdin.close()
        holder.wait()
    assert code == EXIT_CANNOT_START
    assert capsys.readouterr().err == (
        f"vijax: error: output.dir (--out): the folder {str(out)!r} is in use by another vijax run (pid "
        f"{holder.pid} on {socket.gethostname()}); wait until it ends or choose another folder\n"
    )
    assert sorted(os.listdir(out)) == [".vijax.lock"]  # no config.yaml, checkpoints, metrics.json


def test_checkpoint_dir_that_is_a_file_is_refused_before_the_run(tmp_path):
    """obscure before: a FileExistsError ([Errno 17]) at the first checkpoint, after fitting."""
    path = tmp_path / "ck"
    path.write_text("not a folder")
    calls = []
    base = toy_algorithm()
    alg = base._replace(init=lambda key, batch=None: calls.append(1) or base.init(key))
    for resume in (False, True):
        with pytest.raises(ValueError) as e:
            run(alg, jax.random.PRNGKey(SEED), num_steps=20, checkpoint_dir=str(path), resume=resume, **KW)
        assert str(e.value) == (
            f"checkpoint_dir: {str(path)!r} is a file, not a folder of checkpoints; move it away or choose "
            "another folder"
        )
    assert calls == [] and path.read_text() == "not a folder"
