"""Checkpoints of a run of two CPU processes (``jax.distributed``) streaming a memory-mapped corpus
(SVI on LDA, each process reading its own block of the file): killed mid-way and resumed, it ends
bit-identical to an uninterrupted two-process run (``vijax.run._checkpoint.CheckpointStore``)."""

import os
import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from vijax.data import sample_lda_corpus
from vijax.run import _checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEPS = 8  # 4 chunks of 2 steps, a checkpoint after each


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _start(
    tmp_path, name, checkpoint_dirs, *, resume=False, kill_at=(-1, -1), steps=(STEPS, STEPS), corpus=None
) -> list:
    """The two processes of one run, side by side: process p gets ``checkpoint_dirs[p]`` (``-``:
    none), ``resume`` (or ``resume[p]``) and ``num_steps=steps[p]``, writes ``<name>_<p>.npz``, and
    kills itself at update ``kill_at[p]`` (-1: never); SVI on LDA streaming the corpus file ``corpus``,
    or else on a Gaussian mixture."""
    resume = resume if isinstance(resume, tuple) else (resume, resume)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="",
    )
    port, cache = _free_port(), str(tmp_path / "compile_cache")  # the later runs load the programs
    return [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, "_mp_resume_worker.py"), str(port), str(p), checkpoint_dirs[p]]
            + [str(tmp_path / f"{name}_{p}.npz"), str(steps[p]), str(int(resume[p])), str(kill_at[p]), cache]
            + ([] if corpus is None else [str(corpus)]),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for p in range(2)
    ]


def _wait(procs, timeout=120) -> list:
    outs = []
    for p in procs:
        try:
            outs.append((p.communicate(timeout=timeout)[0], p.returncode))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a two-process run did not finish in {timeout} s")
    return outs


def test_two_processes_streaming_a_corpus_killed_and_resumed_equal_an_uninterrupted_run(tmp_path):
    """Both processes map one corpus file (40 documents) and read their halves of it. The uninterrupted run gives both processes one shared folder; the killed and resumed runs
    follow README's recipe (a folder for process 0 only). Process 1 is killed (SIGKILL) when it is
    asked for the batches of update 6, after the checkpoint of step 4; process 0, then waiting for
    it, is killed too. Resumed, both processes end with the uninterrupted run's
    state and trace, bit for bit."""
    shared, ckpt = str(tmp_path / "shared"), str(tmp_path / "ckpt")
    corpus = tmp_path / "corpus.npz"
    sample_lda_corpus(0, 40, 2, 30, doc_length_mean=15).corpus.save_npz(corpus)
    for out, code in _wait(_start(tmp_path, "full", [shared, shared], corpus=corpus)):
        assert code == 0, out
    # one writer: process 0 rotated the checkpoints, process 1 wrote nothing beside them
    assert sorted(os.listdir(shared)) == [".vijax.lock", "ckpt_0000000006.npz", "ckpt_0000000008.npz"]

    procs = _start(tmp_path, "killed", [ckpt, "-"], kill_at=(-1, 6), corpus=corpus)
    out, code = _wait(procs[1:])[0]
    assert code == -signal.SIGKILL, out
    procs[0].kill()  # waiting for process 1 (in the psum of updates 4-5, or after the checkpoint of step 6)
    procs[0].communicate(timeout=60)
    # killed mid-way: after the checkpoint of step 4, or of step 6 when process 1's share of updates
    # 4-5 ran before the signal landed (its dispatch is asynchronous)
    newest = [s for s, _ in _checkpoint.list_checkpoints(ckpt)]
    assert newest in ([2, 4], [4, 6])
    assert not (tmp_path / "killed_0.npz").exists()

    for out, code in _wait(_start(tmp_path, "resumed", [ckpt, "-"], resume=True, corpus=corpus)):
        assert code == 0, out
        # from the newest checkpoint: a replay from the older one would end bit-identical too
        asked = re.findall(r"batches asked from update (\d+)", out)
        assert asked and int(asked[0]) == newest[-1], out
    assert [s for s, _ in _checkpoint.list_checkpoints(ckpt)] == [6, 8]
    full = np.load(tmp_path / "full_0.npz")
    assert any(n.startswith("state/") for n in full.files) and "trace/elbo" in full.files
    assert full["trace/elbo"].shape == (STEPS,)
    for p in range(2):
        for name in ("full", "resumed"):
            got = np.load(tmp_path / f"{name}_{p}.npz")
            assert sorted(got.files) == sorted(full.files)
            for key in full.files:  # bit-identical: same bytes, NaN payloads and signed zeros included
                assert got[key].dtype == full[key].dtype and got[key].tobytes() == full[key].tobytes(), (name, p, key)


def test_two_processes_given_different_num_steps_refuse_at_the_start(tmp_path):
    """The process with fewer steps finished and exited while the other waited forever in its next
    psum: the settings that decide a run's collective calls are compared at the start, and a
    difference raises on both processes, naming the setting (the wait's timeout fails a hang)."""
    outs = _wait(_start(tmp_path, "steps", [str(tmp_path / "ck"), "-"], steps=(STEPS, STEPS + 2)), timeout=90)
    for out, code in outs:
        assert code != 0, out
        want = f"ArgumentError: num_steps must be the same in every process of the run; got process 0: {STEPS}, "
        assert want + f"process 1: {STEPS + 2}" in out, out
        assert "batches asked" not in out, out  # refused before the first chunk


@pytest.mark.slow
def test_two_processes_refuse_together(tmp_path):
    """Settings that differ between the processes, and an error of process 0 alone (its
    checkpoint_dir a file), raise on both processes at the start, where a process that went on
    would wait for the other forever."""
    outs = _wait(_start(tmp_path, "mixed", [str(tmp_path / "ck"), "-"], resume=(True, False)))
    for out, code in outs:
        assert code != 0
        assert "ArgumentError: resume must be the same in every process of the run; got process 0: True, " in out, out
    blocker = tmp_path / "file"
    blocker.write_text("")
    (out0, code0), (out1, code1) = _wait(_start(tmp_path, "file", [str(blocker), "-"]))
    message = f"checkpoint_dir: {str(blocker)!r} is a file, not a folder of checkpoints"
    assert code0 != 0 and f"ArgumentError: {message}" in out0, out0  # a ValueError naming its argument
    assert code1 != 0 and f"CheckpointError: checkpoint_dir: process 0 failed: {message}" in out1, out1
