"""Builds notebooks/07_hmm_and_dp.ipynb (kept as source so the notebook's diff stays readable)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import code, install, md, write  # noqa: E402

INTRO = [
    md(
        "# Hidden Markov models and Dirichlet-process mixtures\n\n"
        "Two models of the *Raise your ELBO* tutorial with **vijax**: the hidden Markov model — Baum–Welch "
        "(EM; Rabiner 1989), Viterbi, posterior marginals, and the Bayesian HMM by CAVI — and the Dirichlet-process "
        "mixture by stick-breaking with its two truncations (Blei and Jordan 2006; Kurihara, Welling and Vlassis "
        "2007), the number of clusters found as the truncation level T grows."
    ),
    install("plots"),
    code(
        "import os\n"
        "import jax\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n"
        "import matplotlib.pyplot as plt\n"
        "import vijax\n"
        "from vijax import expfam\n"
        "SMALL = os.environ.get('VIJAX_NOTEBOOK_SMALL') == '1'  # the test suite runs a small version"
    ),
]

HMM = []  # filled in by _build_07_hmm below when the HMM module is present

DP = [
    md(
        "## 2. Dirichlet-process mixtures: how many clusters as T grows?\n\n"
        "The weights are $\\pi_k = v_k \\prod_{j<k}(1 - v_j)$ with sticks $v_k \\sim \\mathrm{Beta}(1, \\alpha)$ and "
        "mean-field $q(v_k) = \\mathrm{Beta}(\\gamma_{k1}, \\gamma_{k2})$. A variational family must stop somewhere: "
        "**Blei and Jordan** set $v_T = 1$ (a $T$-component model), **Kurihara et al.** keep the model infinite and "
        "tie $q$ to the prior beyond $T$, summing the tail in closed form (a geometric series). Below, six clusters "
        "and CAVI at several $T$: below six every component is used; above six the extra components stay (nearly) empty. The prior on the components matters: with scikit-learn's empirical-Bayes default (each component a priori as wide as the whole data set) the ELBO prefers merging tight, distant clusters."
    ),
    code(
        "from vijax.data import sample_gmm\n"
        "from vijax.inference import restarts, select_restart\n"
        "from vijax.models import DPMixture\n"
        "\n"
        "data = sample_gmm(jax.random.PRNGKey(3), 300 if SMALL else 600, 6, 2, spread=8.0)\n"
        "x = jnp.asarray(data.x)\n"
        "levels = [2, 4, 8] if SMALL else [1, 2, 4, 8, 16]\n"
        "steps = 60 if SMALL else 200\n"
        "\n"
        "def fit(model, key):\n"
        "    # four restarts in one vmapped program; the one with the highest ELBO is kept\n"
        "    alg = restarts(vijax.cavi(model), 4)\n"
        "    run = jax.jit(lambda s: jax.lax.scan(lambda c, k: alg.step(k, c, x), s, jax.random.split(key, steps)))\n"
        "    state, info = run(alg.init(key, x))\n"
        "    best = int(jnp.argmax(info.elbo[-1]))\n"
        "    q = select_restart(state.q_global, best)\n"
        "    loc = model.local_step(expfam.tree_mean_params(q), x)\n"
        "    return q, loc.local_params, np.asarray(info.elbo[:, best])\n"
        "\n"
        "found, fits = {}, {}\n"
        "for trunc in ('blei_jordan', 'kurihara'):\n"
        "    for T in levels:\n"
        "        # components: precisions ~ Gamma(2, 2) (unit variance a priori, as these clusters have), means\n"
        "        # ~ N(mean(x), 100 / precision): a prior that lets clusters be tight and far apart\n"
        "        model = DPMixture.gaussian(T, 2, truncation=trunc, loc0=np.asarray(x.mean(0)), kappa0=0.01, a0=2.0, b0=2.0)\n"
        "        q, resp, elbo = fit(model, jax.random.PRNGKey(T))\n"
        "        assert np.all(np.diff(elbo) > -1e-6 * np.abs(elbo[1:]))  # CAVI never lowers the ELBO\n"
        "        found[trunc, T] = model.clusters_found(resp, min_count=0.01 * x.shape[0])\n"
        "        fits[trunc, T] = (model, q, resp)\n"
        "for trunc in ('blei_jordan', 'kurihara'):\n"
        "    print(f'{trunc:12}', {T: found[trunc, T] for T in levels})"
    ),
    code(
        "fig, axes = plt.subplots(1, 2, figsize=(10, 4))\n"
        "for trunc, marker in (('blei_jordan', 'o-'), ('kurihara', 's--')):\n"
        "    axes[0].plot(levels, [found[trunc, T] for T in levels], marker, label=trunc)\n"
        "axes[0].axhline(6, color='0.7', lw=1); axes[0].set_xscale('log', base=2)\n"
        "axes[0].set_xlabel('truncation level T'); axes[0].set_ylabel('clusters found (>= 1% of the data)'); axes[0].legend()\n"
        "model, q, resp = fits['kurihara', levels[-1]]\n"
        "axes[1].scatter(x[:, 0], x[:, 1], c=np.argmax(np.asarray(resp), 1), s=6, cmap='tab10')\n"
        "axes[1].set_title(f'tied tail, T = {levels[-1]}: assignments'); axes[1].set_aspect('equal', 'datalim')\n"
        "plt.show()\n"
        "w = np.asarray(model.expected_weights(q))\n"
        "print('E[pi] (last entry: the tail beyond T):', np.round(w, 3))"
    ),
    md(
        "The same experiment at larger scale, with scikit-learn's `dirichlet_process` mixture beside it, is the "
        "config `configs/dp_mixture_truncation.yaml` (`vijax run configs/dp_mixture_truncation.yaml`)."
    ),
]


def _build_07_hmm():
    return [
        md(
            "## 1. Hidden Markov models\n\n"
            "A $K$-state chain $z_1 \\to z_2 \\to \\dots$ with initial distribution $\\pi$, transition matrix $A$ and "
            "emissions $p(x_t \\mid z_t)$. The forward–backward recursions run in log space with `lax.scan` (or "
            "`lax.associative_scan` for long sequences), over a batch of sequences of unequal length padded with a mask. "
            "Baum–Welch is EM: the E-step's expected counts, then the M-step's normalised counts; "
            "`vijax.inference.em` runs it, and the log-likelihood never decreases."
        ),
        code(
            "from vijax.data import sample_hmm\n"
            "from vijax.inference import em\n"
            "from vijax.models import CategoricalHMM, HMMParams, CategoricalEmissions\n"
            "\n"
            "K, V = 3, 6\n"
            "true = HMMParams(jnp.array([0.6, 0.3, 0.1]),\n"
            "                 jnp.array([[0.90, 0.05, 0.05], [0.10, 0.80, 0.10], [0.05, 0.15, 0.80]]),\n"
            "                 CategoricalEmissions(jnp.array([[0.50, 0.30, 0.10, 0.05, 0.03, 0.02],\n"
            "                                                 [0.02, 0.08, 0.40, 0.40, 0.08, 0.02],\n"
            "                                                 [0.02, 0.03, 0.05, 0.10, 0.30, 0.50]])))\n"
            "model = CategoricalHMM(num_states=K, num_symbols=V)\n"
            "sample = sample_hmm(jax.random.PRNGKey(0), true, num_sequences=50 if SMALL else 200, length=100, min_length=60)\n"
            "data = sample.data                      # HMMData(obs (B, T), lengths (B,)): unequal lengths, padded\n"
            "alg = em(model)\n"
            "state = alg.init(jax.random.PRNGKey(1), data)\n"
            "step = jax.jit(alg.step)\n"
            "lls = []\n"
            "for t in range(30 if SMALL else 100):\n"
            "    state, info = step(jax.random.PRNGKey(t), state, data)\n"
            "    lls.append(float(info.log_likelihood))\n"
            "assert np.all(np.diff(lls) > -1e-6 * np.abs(lls[1:]))  # Baum-Welch never lowers the log-likelihood\n"
            "plt.plot(lls); plt.xlabel('Baum-Welch iteration'); plt.ylabel('log-likelihood'); plt.show()\n"
            "print('true log-likelihood:', float(jnp.sum(model.log_likelihood(true, data))), ' fitted:', lls[-1])"
        ),
        code(
            "fitted = state.q_global\n"
            "post = model.posterior(fitted, data)\n"
            "path, _ = model.viterbi(fitted, data)\n"
            "fig, ax = plt.subplots(figsize=(10, 3))\n"
            "ax.imshow(np.asarray(post.marginals[0]).T, aspect='auto', cmap='Greys', interpolation='nearest')\n"
            "n0 = int(data.lengths[0])\n"
            "ax.plot(np.arange(n0), np.asarray(path[0])[:n0], 'r.', ms=3, label='Viterbi path')\n"
            "ax.set_xlabel('t'); ax.set_ylabel('state'); ax.set_title('posterior marginals of sequence 0'); ax.legend()\n"
            "plt.show()\n"
            "# the fitted states are the true ones up to a relabelling: match them by their emission rows\n"
            "perm = np.argmax(np.asarray(fitted.emissions.probs) @ np.asarray(true.emissions.probs).T, axis=1)\n"
            "mask = np.asarray(sample.states) >= 0\n"
            "print('Viterbi state accuracy:', float(np.mean(perm[np.asarray(path)][mask] == np.asarray(sample.states)[mask])))"
        ),
        md(
            "**The Bayesian HMM.** With Dirichlet priors on $\\pi$, the rows of $A$ and of the emission matrix, "
            "the same model meets the conjugate-model protocol: the local step is forward–backward on the tilted chain "
            "$\\exp E[\\log \\pi]$, $\\exp E[\\log A]$, so `vijax.cavi` (and `svi`, `ssvi` over minibatches of "
            "sequences) fit $q(\\pi) q(A) q(B) q(z)$, and the ELBO never decreases."
        ),
        code(
            "alg_vb = vijax.cavi(model)\n"
            "state_vb = alg_vb.init(jax.random.PRNGKey(2), data)\n"
            "step_vb = jax.jit(alg_vb.step)\n"
            "elbos = []\n"
            "for t in range(20 if SMALL else 60):\n"
            "    state_vb, info = step_vb(jax.random.PRNGKey(t), state_vb, data)\n"
            "    elbos.append(float(info.elbo))\n"
            "assert np.all(np.diff(elbos) > -1e-6 * np.abs(elbos[1:]))\n"
            "print('ELBO after CAVI:', elbos[-1], ' (log-likelihood of the EM fit:', lls[-1], ')')"
        ),
    ]


if __name__ == "__main__":
    cells = INTRO + _build_07_hmm() + DP
    write(cells, "notebooks/07_hmm_and_dp.ipynb")
