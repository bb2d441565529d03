"""The ``vijax`` command end to end on the toy experiment of test_config."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.run.test_config import TOY
from vijax.run import _cli, main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_config(tmp_path, extra=""):
    path = tmp_path / "toy.yaml"
    path.write_text(f"""
experiment: {TOY}
seed: 1
algorithm: {{noise: 0.05}}
run: {{num_steps: 120, chunk_size: 40, eval_every: 40, checkpoint_every: 80}}
{extra}""")
    return str(path)


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert TOY in out and "toy quadratic for the runner tests" in out


def test_run_writes_results_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", write_config(tmp_path), "--out", str(out), "--no-progress", "--set", "data.center=0.5"]) == 0
    printed = capsys.readouterr().out
    assert "120 steps" in printed and "final ELBO" in printed and "distance=" in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["experiment"] == TOY and metrics["num_steps"] == 120
    assert metrics["config"]["data"]["center"] == 0.5
    assert metrics["config"]["output"]["dir"] == str(out)
    assert metrics["config"]["run"]["progress"] is False
    assert len(metrics["elbo"]) == 120 and metrics["final_elbo"] == metrics["elbo"][-1]
    assert metrics["converged"] is False and metrics["wall_time"] > 0
    assert [e["step"] for e in metrics["evals"]] == [40, 80, 120]
    umask = os.umask(0o022)
    os.umask(umask)
    for name in ("metrics.json", "config.yaml"):  # the umask's mode, as any tool's output
        assert (out / name).stat().st_mode & 0o777 == 0o666 & ~umask
    assert metrics["summary"]["seed"] == 1 and metrics["summary"]["distance"] < 0.5
    assert (out / "elbo.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "toy.txt").exists() and (out / "config.yaml").exists()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["ckpt_0000000080.npz", "ckpt_0000000120.npz"]
    # Continue the same run to 200 steps.
    assert (
        main(
            [
                "run",
                write_config(tmp_path),
                "--out",
                str(out),
                "--no-progress",
                "--set",
                "data.center=0.5",
                "--set",
                "run.num_steps=200",
                "--resume",
                "--allow-changes",
            ]
        )
        == 0
    )
    metrics2 = json.loads((out / "metrics.json").read_text())
    assert metrics2["num_steps"] == 200 and len(metrics2["elbo"]) == 200
    assert metrics2["elbo"][:120] == metrics["elbo"]
    assert [e["step"] for e in metrics2["evals"]] == [40, 80, 120, 160, 200]


def test_default_config_is_used_without_argument(tmp_path, monkeypatch):
    monkeypatch.setattr(_cli, "default_config", lambda: {"experiment": TOY, "run": {"num_steps": 30, "chunk_size": 10}})
    out = tmp_path / "default"
    assert main(["run", "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "metrics.json").read_text())["num_steps"] == 30


def test_output_dir_from_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "run",
                write_config(tmp_path),
                "--no-progress",
                "--set",
                "run.num_steps=20",
                "--set",
                "run.eval_every=null",
            ]
        )
        == 0
    )
    assert (tmp_path / "results" / TOY / "metrics.json").exists()


def test_bad_config_exits_2_and_names_key(tmp_path, capsys):
    assert main(["run", write_config(tmp_path), "--set", "model.nmae=3"]) == 2
    assert "model.nmae" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    with pytest.raises(SystemExit):
        main(["frobnicate"])


def test_version_is_written_in_one_place_and_the_command_prints_it(capsys):
    import importlib.metadata

    import vijax

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"vijax {vijax.__version__}"
    assert importlib.metadata.version("vijax-toolkit") == vijax.__version__  # pyproject reads it from vijax/__init__.py
    pyproject = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and "\nversion =" not in pyproject.split("[tool.setuptools.dynamic]")[0]


def test_python_dash_m_vijax_is_the_command():
    import subprocess
    import sys

    import vijax

    out = subprocess.run([sys.executable, "-m", "vijax", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"vijax {vijax.__version__}"


def test_a_closed_pipe_ends_the_command_quietly():
    """``vijax list | head -1`` where the reader has gone: the command's output goes to a pipe whose
    read end is closed, and the command ends with status 1 and no BrokenPipeError traceback."""
    import subprocess
    import sys

    code = (
        "import os, sys; r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
        "from vijax.run._cli import main\n"
        "sys.exit(main(['list']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_elbo_plot_names_the_metrics_it_has_no_panel_for(tmp_path):
    """Six held-out metrics, four panels: the two others are named (a warning and a note in the
    figure), not dropped silently."""
    import warnings

    from vijax.run._plots import plot_elbo

    trace = {"step": list(range(10)), "elbo": [float(-i) for i in range(10)]}
    evals = [{"step": s, **{f"m{j}": float(s * j) for j in range(6)}} for s in (0, 5, 9)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = plot_elbo(trace, evals, str(tmp_path / "elbo.png"))
    messages = [str(w.message) for w in caught]
    assert any("not plotted" in m and "m4, m5" in m for m in messages), messages
    assert (tmp_path / "elbo.png").stat().st_size > 0 and path.endswith("elbo.png")
    # several methods' metrics share a panel per metric (the default run, dp_bernoulli: 4 x 2)
    evals = [
        {"step": s, **{f"{m}.{k}": float(s) for m in ("a", "b", "c", "d") for k in ("kl", "used")}} for s in (0, 9)
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_elbo(trace, evals, str(tmp_path / "grouped.png"))
    assert not [w for w in caught if "not plotted" in str(w.message)]
    from vijax.run._plots import _panels

    assert _panels(["a.kl", "b.kl", "loss", "a.used"]) == {
        "kl": [("a", "a.kl"), ("b", "b.kl")],
        "loss": [(None, "loss")],
        "used": [("a", "a.used")],
    }


def test_a_shipped_config_runs_by_name_from_any_folder(tmp_path, monkeypatch):
    """`vijax run NAME` and the README's `vijax run configs/NAME.yaml` read the shipped config where no
    such file is here; a file that is here wins; an unknown name lists the shipped ones."""
    from vijax.run import ConfigError, resolve_config, shipped_config_dir, shipped_configs

    monkeypatch.chdir(tmp_path)  # an empty folder
    folder = shipped_config_dir()
    assert folder is not None and "gmm_simulation" in shipped_configs()
    want = str(folder / "gmm_simulation.yaml")
    assert resolve_config("gmm_simulation") == want
    assert resolve_config("gmm_simulation.yaml") == want
    assert resolve_config("configs/gmm_simulation.yaml") == want
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "gmm_simulation.yaml").write_text("experiment: gmm_simulation\n")
    assert resolve_config("configs/gmm_simulation.yaml") == "configs/gmm_simulation.yaml"  # the user's own
    assert resolve_config("elsewhere/x.yaml") == "elsewhere/x.yaml"  # load_config names the missing file
    with pytest.raises(ConfigError, match="config: no file 'gmm_simulaton' here and no shipped config.*gmm_simulation"):
        resolve_config("gmm_simulaton")
