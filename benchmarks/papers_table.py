"""docs/papers.md's numbers, generated from the recorded runs of its rows' commands.

A row of docs/papers.md whose numbers come from a run holds them between the markers
``<!-- papers:NAME -->`` and ``<!-- /papers -->``; the text between them is made here from
``benchmarks/results/papers/NAME.json``, the ``metrics.json`` that the row's command wrote (with
the command beside it), and says which run it comes from (its size, steps and seed). Nothing
between the markers is written by hand: tests/test_papers_page.py fails when the page differs from
what the recorded runs give.

    python benchmarks/papers_table.py run gmm_simulation   # runs the row's command, records its metrics.json, rewrites the page
    python benchmarks/papers_table.py write                # rewrites the page from the recorded runs
    python benchmarks/papers_table.py check                # exit status 1 when the page differs from them

``RUNS`` names each recorded run's command (the arguments of ``vijax run``); ``FORMAT`` turns its
metrics into the row's text.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from _device import _PLATFORMS, add_device_argument  # this folder's --device switch

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "papers.md"
# pages with generated spans: the papers' page, and pages that show its runs in more detail
PAGES = [PAGE, ROOT / "docs" / "dp_bernoulli.md", ROOT / "docs" / "guide.md"]
RESULTS = ROOT / "benchmarks" / "results" / "papers"

# the row's command: `vijax run` with these arguments (the output folder is the script's)
RUNS = {
    "gmm_simulation": ["configs/gmm_simulation.yaml"],
    "dp_bernoulli_full": ["configs/dp_bernoulli_full.yaml"],
    "ard_regression": ["configs/ard_regression.yaml"],
    "mean_field_gaussian": ["configs/mean_field_gaussian.yaml"],
    "smm": ["configs/smm.yaml"],
    "plsa": ["configs/plsa.yaml"],
    "dp_mixture_truncation": ["configs/dp_mixture_truncation.yaml"],
    "gmm_cavi_vs_nuts": ["configs/gmm_cavi_vs_nuts.yaml"],
    "gmm_histograms_starts": ["configs/gmm_histograms_starts.yaml"],
}

# NAME, or NAME.PART for a second text from the same run
_SPAN = re.compile(r"<!-- papers:(?P<name>[\w-]+(?:\.[\w-]+)?) -->(?P<body>.*?)<!-- /papers -->", re.S)


def _num(x: float, digits: int) -> str:
    """A number as the page writes it: the minus sign U+2212."""
    return f"{x:.{digits}f}".replace("-", "\u2212")


def _command(record: dict) -> str:
    return "`vijax run " + " ".join(record["command"]) + "`"


def _steps(r: dict) -> str:
    return f"converged after {r['num_steps']} steps" if r.get("converged") else f"{r['num_steps']} steps"


def _gmm_simulation(r: dict) -> str:
    s, c = r["summary"], r["config"]
    weights = ", ".join(_num(w, 3) for w in s["weights"])
    return (
        f"weights {weights}, held-out mean log predictive {_num(s['heldout_log_predictive'], 3)}; "
        f"from {_command(r)}: {c['data']['num_train']:,} training and {c['data']['num_test']:,} test points, "
        f"K = {c['model']['num_components']}, the best of {c['algorithm']['num_restarts']} restarts, "
        f"seed {c['seed']}, "
        + (f"converged after {r['num_steps']} steps" if r["converged"] else f"{r['num_steps']} steps")
    )


_DP_LABELS = {"meanfield": "mean-field", "ssvi_a": "SSVI-A", "ssvi": "SSVI", "gibbs": "Gibbs"}


def _dp_bernoulli(r: dict) -> str:
    s, c = r["summary"], r["config"]
    methods = c["algorithm"]["methods"]
    used = ", ".join(f"{_DP_LABELS[m]} {s[f'{m}_components']}" for m in methods)
    kl = ", ".join(f"{_num(s[f'{m}_kl'], 2)} ± {_num(s[f'{m}_kl_stderr'], 2)}" for m in methods)
    d = c["data"]
    return (
        f"Components used (truth {s['truth_components']}): {used}; KL ± s.e.: {kl}; "
        f"from {_command(r)}: {d['num_points']:,} points of dimension {d['dim']} (data seed {d['seed']}), "
        f"K = {c['model']['num_components']}, {r['num_steps']} steps, seed {c['seed']}, "
        f"KL from {s['kl_samples']:,} draws"
    )


def _ard_regression(r: dict) -> str:
    s, d = r["summary"], r["config"]["data"]
    sk = s["sklearn"]
    return (
        f"{d['num_train']} points, {d['dim']} inputs of which {d['num_relevant']} matter: coefficient RMSE "
        f"{_num(s['coef_rmse'], 4)}, held-out RMSE {_num(s['heldout_rmse'], 4)} ({d['num_test']:,} test points), "
        f"log predictive {_num(s['heldout_log_predictive'], 4)}; scikit-learn's `ARDRegression` on the same data: "
        f"{_num(sk['coef_rmse'], 4)}, {_num(sk['heldout_rmse'], 4)}, {_num(sk['heldout_log_predictive'], 4)}; "
        f"from {_command(r)}: data seed {d['seed']}, " + _steps(r)
    )


def _dp_bernoulli_trace(r: dict) -> str:
    first, last = r["evals"][0], r["evals"][-1]
    return (
        f"SSVI-A: {first['ssvi_a.components_used']} → {last['ssvi_a.components_used']} components "
        f"from step {first['step']} to {last['step']}"
    )


def _dp_bernoulli_gibbs(r: dict) -> str:
    return _num(r["summary"]["gibbs_kl"], 2)


def _mean_field_gaussian(r: dict) -> str:
    s, c = r["summary"], r["config"]
    rows = {row["method"]: row for row in s["table"]}
    mf, ng, fr = rows["bbvi-meanfield"], rows["ngvi-meanfield"], rows["bbvi-fullrank"]
    optimum, corr = s["moments"]["mean-field optimum"]["sd"][0], s["correlation_of_q"]
    a = c["algorithm"]
    return (
        f"ρ = {c['model']['correlation']}: mean-field sds {_num(mf['median sd ratio'], 3)} (bbvi) and "
        f"{_num(ng['median sd ratio'], 3)} (ngvi) against the closed form {_num(optimum, 3)}, correlation of the "
        f"draws {_num(corr['bbvi-meanfield'], 2)} and {_num(corr['ngvi-meanfield'], 2)}; full-rank q recovers sds "
        f"{_num(fr['median sd ratio'], 3)} and the correlation ({_num(corr['bbvi-fullrank'], 3)}); PSIS k̂ "
        f"{_num(mf['k-hat'], 2)} and {_num(ng['k-hat'], 2)} flag the mean-field fits (full rank "
        f"{_num(fr['k-hat'], 2)}); from {_command(r)}: {mf['steps']:,} steps each, seed {c['seed']}, k̂ from "
        f"{a['psis_draws']:,} draws, moments from {a['moment_draws']:,}"
    )


def _smm(r: dict) -> str:
    s, c = r["summary"], r["config"]
    d, errors = c["data"], s["max_l1_eta_error_per_start"]
    return (
        f"{c['algorithm']['num_restarts']} starts reach the training frequencies' held-out score "
        f"({_num(s['heldout_log_prob'], 5)} per symbol, the frequencies' {_num(s['frequencies_heldout_log_prob'], 5)}; "
        f"true mixture {_num(s['true_heldout_log_prob'], 5)}) with different components (matched to the true "
        f"ones, the worst off by {_num(min(errors), 2)}–{_num(max(errors), 2)} in L1 per start); from {_command(r)}: "
        f"{d['num_train']:,} training and {d['num_test']:,} test points, {d['num_symbols']} symbols, "
        f"K = {c['model']['num_components']}, {s['steps']} steps, seed {c['seed']}"
    )


def _plsa_run(r: dict) -> str:
    s, d = r["summary"], r["config"]["data"]
    return (
        f"from {_command(r)}: {d['num_docs']:,} documents ({s['train_docs']:,} training, {s['test_docs']} test), "
        f"V = {d['vocab_size']}, {r['config']['model']['num_topics']} topics, "
        f"{s['runs']['plsa1']['steps']} steps each, data seed {d['seed']}"
    )


def _plsa(r: dict) -> str:
    runs = r["summary"]["runs"]
    return (
        f"perplexity {_num(runs['plsa1']['perplexity'], 2)} and {_num(runs['plsa2']['perplexity'], 2)}; "
        f"LDA by CAVI {_num(runs['lda_cavi']['perplexity'], 2)}; true topics "
        f"{_num(runs['true_topics']['perplexity'], 2)}; " + _plsa_run(r)
    )


def _plsa_lda(r: dict) -> str:
    runs = r["summary"]["runs"]
    return (
        f"held-out per word {_num(runs['lda_cavi']['heldout_per_word'], 4)} (true topics "
        f"{_num(runs['true_topics']['heldout_per_word'], 4)}); " + _plsa_run(r)
    )


def _dp_bernoulli_table(r: dict) -> str:
    """The run's table with the paper's figures in parentheses, as a block of its own (blank lines
    around it, so that the markers stay out of the table)."""

    def paper(x):
        return "not run" if x is None else f"{x:g}"

    lines = [
        "",
        "",
        "| method | components used (paper) | KL(p(y\\|π,φ) ‖ p(y\\|π̂,φ̂)) ± s.e. (paper) |",
        "|---|---|---|",
    ]
    for row in r["summary"]["table"]:
        used = f"{row['components_used']} ({paper(row['paper_components_used'])})"
        kl = (
            "0" if "kl" not in row else f"{_num(row['kl'], 2)} ± {_num(row['kl_stderr'], 2)} ({paper(row['paper_kl'])})"
        )
        lines.append(f"| {row['method']} | {used} | {kl} |")
    return "\n".join([*lines, "", ""])


def _dp_bernoulli_ssvi_a(r: dict) -> str:
    s = r["summary"]
    return (
        f"{_num(s['ssvi_a_kl'], 2)} vs {_num(s['gibbs_kl'], 2)}, "
        f"{s['ssvi_a_components']} vs {s['gibbs_components']} components"
    )


def _dp_bernoulli_range(r: dict) -> str:
    kls = [r["summary"][f"{m}_kl"] for m in r["config"]["algorithm"]["methods"] if m != "meanfield"]
    return f"{_num(min(kls), 2)}–{_num(max(kls), 2)}"


def _dp_bernoulli_ssvi(r: dict) -> str:
    s = r["summary"]
    return f"{_num(s['ssvi_kl'], 2)} against {_num(s['ssvi_a_kl'], 2)} here"


_TRUNCATIONS = {"blei_jordan": "Blei & Jordan", "kurihara": "Kurihara et al."}


def _dp_mixture_truncation(r: dict) -> str:
    s, c = r["summary"], r["config"]
    found = {}
    for row in s["runs"]:
        found.setdefault(row["truncation"], {})[row["T"]] = row["clusters_found"]
    levels = c["model"]["truncation_levels"]
    counts = "; ".join(
        f"{_TRUNCATIONS[t]} {', '.join(str(by_t[level]) for level in levels)}" for t, by_t in found.items()
    )
    d = c["data"]
    return (
        f"clusters found for T = {', '.join(map(str, levels))} ({s['true_clusters']} true): {counts}; "
        f"from {_command(r)}: {d['num_train']} training points in {d['dim']} dimensions, data seed {d['seed']}"
    )


def _gmm_cavi_vs_nuts(r: dict) -> str:
    s, c = r["summary"], r["config"]
    d, nuts = c["data"], c["algorithm"]["nuts"]
    return (
        f"2-D simulation ({d['num_train']:,} training points, K = {c['model']['num_components']}): held-out log "
        f"predictive CAVI {_num(s['cavi_heldout_log_predictive'], 3)}, NUTS {_num(s['nuts_heldout_log_predictive'], 3)}; "
        f"CAVI within {s['within']} nats after "
        f"{s['cavi_time_to_within']:.1f} s, NumPyro's NUTS after {s['nuts_time_to_within']:.1f} s (wall times, both "
        f"mostly compilation, on a 2-core CPU); from {_command(r)}: seed {c['seed']}, "
        f"NUTS {nuts['warmup']} warmup and {nuts['samples']:,} draws, {s['nuts_divergences']} divergent"
    )


def _gmm_cavi_vs_nuts_ratio(r: dict) -> str:
    s = r["summary"]
    return f"{s['nuts_time_to_within'] / s['cavi_time_to_within']:.1f}×"


def _gmm_cavi_vs_nuts_scores(r: dict) -> str:
    s = r["summary"]
    return (
        f"{_num(s['nuts_heldout_log_predictive'], 4)} against {_num(s['cavi_heldout_log_predictive'], 4)}; "
        f"from {_command(r)}"
    )


def _sci(x: float, digits: int) -> str:
    """x as m·10ⁿ, the exponent in superscript digits."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{_num(float(mantissa), digits)}·10" + str(int(exponent)).translate(
        str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    )


def _gmm_histograms_starts(r: dict) -> str:
    s, c = r["summary"], r["config"]
    final, d = r["elbo"][-1], c["data"]
    return (
        f"{len(final)} starts, {s['distinct_local_optima']} different optima, final ELBO {_sci(min(final), 3)} to "
        f"{_sci(max(final), 3)}; from {_command(r)}: {d['num_train']:,} training histograms of {d['num_types']} image "
        f"types, K = {c['model']['num_components']}, seed {c['seed']}, " + _steps(r)
    )


_PLSA_ROWS = {
    "plsa1": "pLSA1 by EM (MAP, Dirichlet({c}) on p(w \\| z))",
    "plsa2": "pLSA2 by EM (same)",
    "lda_cavi": "LDA by CAVI (α = {a}, η = {e})",
    "true_topics": "true topics, p(z \\| d) folded in",
}


def _plsa_table(r: dict) -> str:
    """The run's table (perplexity and held-out per-word log p of each model), as a block of its own."""
    m, runs = r["config"]["model"], r["summary"]["runs"]
    lines = ["", "", "| model | perplexity | held-out per-word log p |", "|---|---|---|"]
    for name, label in _PLSA_ROWS.items():
        label = label.format(c=m["word_concentration"], a=m["lda_alpha"], e=m["lda_eta"])
        lines.append(f"| {label} | {_num(runs[name]['perplexity'], 2)} | {_num(runs[name]['heldout_per_word'], 4)} |")
    return "\n".join([*lines, "", ""])


FORMAT = {
    "gmm_simulation": _gmm_simulation,
    "dp_bernoulli_full": _dp_bernoulli,
    "dp_bernoulli_full.trace": _dp_bernoulli_trace,
    "dp_bernoulli_full.gibbs": _dp_bernoulli_gibbs,
    "dp_bernoulli_full.table": _dp_bernoulli_table,
    "dp_bernoulli_full.ssvi_a": _dp_bernoulli_ssvi_a,
    "dp_bernoulli_full.ssvi": _dp_bernoulli_ssvi,
    "dp_bernoulli_full.range": _dp_bernoulli_range,
    "ard_regression": _ard_regression,
    "mean_field_gaussian": _mean_field_gaussian,
    "smm": _smm,
    "plsa": _plsa,
    "plsa.lda": _plsa_lda,
    "plsa.table": _plsa_table,
    "dp_mixture_truncation": _dp_mixture_truncation,
    "gmm_cavi_vs_nuts": _gmm_cavi_vs_nuts,
    "gmm_cavi_vs_nuts.ratio": _gmm_cavi_vs_nuts_ratio,
    "gmm_cavi_vs_nuts.scores": _gmm_cavi_vs_nuts_scores,
    "gmm_histograms_starts": _gmm_histograms_starts,
}


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def render(text: str) -> str:
    """The page with every generated span made from its recorded run."""

    def sub(m):
        name = m["name"]
        return f"<!-- papers:{name} -->{FORMAT[name](load(name.split('.')[0]))}<!-- /papers -->"

    return _SPAN.sub(sub, text)


def record(name: str, metrics: pathlib.Path) -> None:
    """Keeps a run's metrics.json as the row's recorded run, with the command that wrote it (the
    output folder, which was the script's, left out)."""
    data = json.loads(metrics.read_text())
    data["config"].pop("output", None)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {"command": RUNS[name], **data}
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1) + "\n")


def run(name: str, device: str) -> None:
    """Runs row ``name``'s command on ``device`` (JAX's platforms for it, as ``--device`` sets them)."""
    env = {**os.environ, "JAX_PLATFORMS": _PLATFORMS[device]}
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "vijax", "run", *RUNS[name], "--out", folder]
        subprocess.run(command, cwd=ROOT, check=True, env=env)
        record(name, pathlib.Path(folder) / "metrics.json")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("write", help="rewrite docs/papers.md from the recorded runs")
    sub.add_parser("check", help="exit status 1 when docs/papers.md differs from the recorded runs")
    r = sub.add_parser("run", help="run rows' commands, record their metrics and rewrite the page")
    r.add_argument("names", nargs="+", choices=sorted(RUNS))
    add_device_argument(r)
    args = p.parse_args(argv)
    if args.action == "run":
        for name in args.names:
            run(name, args.device)
    status = 0
    for page in PAGES:
        text = page.read_text()
        new = render(text)
        if args.action != "check":
            page.write_text(new)
        elif new != text:
            print(
                f"docs/{page.name} differs from benchmarks/results/papers/*.json: run benchmarks/papers_table.py write"
            )
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
