"""Builds notebooks/06_vae_and_composition.ipynb (kept as source so the notebook's diff stays readable)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import INSTALL, code, md, write  # noqa: E402

DERIVED = [
    md("# Your own model, part 2: derived conjugate updates, the VAE, and vijax inside a larger model\n\n"
       "Three ways a user's own model meets **vijax**:\n\n"
       "1. a **conditionally conjugate model written as a log-joint** — vijax derives the CAVI / SVI / SSVI "
       "updates by autodiff (Blei, Kucukelbir and McAuliffe 2017, §4.2);\n"
       "2. a **variational autoencoder** (AEVB; Kingma and Welling 2014; the *Raise your ELBO* tutorial), and "
       "its fully Bayesian version with a posterior over the decoder's weights;\n"
       "3. a **Bayesian last layer** on a neural network, trained end to end inside the user's own "
       "`jax.jit`-ed loop, and fits `vmap`ped over seeds."),
    INSTALL,
    code("import os, time\n"
         "import jax\n"
         "import jax.numpy as jnp\n"
         "import numpy as np\n"
         "import matplotlib.pyplot as plt\n"
         "from jax.scipy.special import gammaln\n"
         "from vijax import expfam\n"
         "from vijax.inference import make_algorithm\n"
         "from vijax.models import Local, conjugate_model\n"
         "SMALL = os.environ.get('VIJAX_NOTEBOOK_SMALL') == '1'   # the test suite runs a small version"),
    md("## 1. A conjugate model from its log-joint\n\n"
       "A mixture of Poissons with a Dirichlet prior on the weights and Gamma priors on the rates is not a "
       "model vijax ships. Its log-joint for one datum, $\\log p(x_n, z_n \\mid \\pi, \\lambda) = \\sum_k z_{nk}"
       "(\\log \\pi_k + x_n \\log\\lambda_k - \\lambda_k) - \\log x_n!$, is **linear in each variable's "
       "sufficient statistics**: $\\log \\pi$ (Dirichlet), $(\\log\\lambda, \\lambda)$ (Gamma) and the one-hot "
       "$z_n$ (Categorical). That is conditional conjugacy. Written in those statistics — the layout of each "
       "family's `mean_params()` — the expected log-joint under mean-field $q$ is the log-joint at the mean "
       "parameters, and its gradients are the updates: $\\nabla_{E[z_n]}$ gives $q(z_n)$'s logits, "
       "$\\sum_n \\nabla_{E[t(\\beta)]}$ the global statistics."),
    code("rng = np.random.default_rng(0)\n"
         "x = jnp.asarray(np.concatenate([rng.poisson(2.0, 300), rng.poisson(9.0, 200), rng.poisson(25.0, 100)]), jnp.float32)\n"
         "K = 3\n"
         "\n"
         "def log_joint(g, l, x):\n"
         "    (log_pi,) = g['pi']\n"
         "    log_rate, rate = g['rate']\n"
         "    (z,) = l['z']\n"
         "    return jnp.sum(z * (log_pi + x * log_rate - rate)) - gammaln(x + 1.0)\n"
         "\n"
         "model = conjugate_model(\n"
         "    log_joint,\n"
         "    priors={'pi': expfam.Dirichlet.from_concentration(jnp.ones(K)),\n"
         "            'rate': expfam.Gamma.from_shape_rate(jnp.ones(K), 0.1 * jnp.ones(K))},\n"
         "    locals=lambda x: {'z': Local(expfam.Categorical.from_logits(jnp.zeros(K)))},\n"
         "    example=x)\n"
         "\n"
         "results = {}\n"
         "for name, kw in [('cavi', {}), ('svi', dict(num_data=x.shape[0])), ('ssvi', dict(num_data=x.shape[0]))]:\n"
         "    alg = make_algorithm(name, model, **kw)\n"
         "    state, step = alg.init(jax.random.PRNGKey(0), x), jax.jit(alg.step)\n"
         "    elbos = []\n"
         "    for t in range(40):\n"
         "        batch = x if name == 'cavi' else x[jax.random.choice(jax.random.PRNGKey(100 + t), x.shape[0], (100,))]\n"
         "        state, info = step(state, batch, jax.random.PRNGKey(t))\n"
         "        elbos.append(float(info.elbo))\n"
         "    results[name] = (state, elbos)\n"
         "    rates = np.sort(np.asarray(state.q_global['rate'].mean_params()[1]))\n"
         "    print(f'{name:5}  E[rate] = {np.round(rates, 2)}   (truth 2, 9, 25)')"),
    code("fig, ax = plt.subplots(figsize=(6, 3))\n"
         "for name, (_, elbos) in results.items():\n"
         "    ax.plot(elbos, label=name)\n"
         "ax.set_xlabel('step'); ax.set_ylabel('ELBO (estimate)'); ax.set_ylim(np.percentile(results['cavi'][1], 5) - 200, None)\n"
         "ax.legend(); plt.show()\n"
         "assert np.all(np.diff(results['cavi'][1]) >= -1e-3 * abs(results['cavi'][1][-1]))   # CAVI never decreases"),
    md("A log-joint that is **not** conjugate is refused with the variable named — here $E[\\lambda]^2$ "
       "stands where a statistic would have to:"),
    code("def not_conjugate(g, l, x):\n"
         "    log_rate, rate = g['rate']\n"
         "    (z,) = l['z']\n"
         "    return jnp.sum(z * (x * log_rate - rate ** 2))\n"
         "try:\n"
         "    conjugate_model(not_conjugate, priors={'rate': model.priors['rate']}, locals=model.locals, example=x)\n"
         "except ValueError as err:\n"
         "    print('ValueError:', err)"),
]

cells = DERIVED
write(cells, "notebooks/06_vae_and_composition.ipynb")
