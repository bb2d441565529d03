"""Builds notebooks/06_vae_and_composition.ipynb (kept as source so the notebook's diff stays readable)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import code, install, md, write  # noqa: E402

DERIVED = [
    md(
        "# Your own model, part 2: derived conjugate updates, the VAE, and vijax inside a larger model\n\n"
        "Three ways a user's own model meets **vijax**:\n\n"
        "1. a **conditionally conjugate model written as a log-joint** — vijax derives the CAVI / SVI / SSVI "
        "updates by autodiff (Blei, Kucukelbir and McAuliffe 2017, §4.2);\n"
        "2. a **variational autoencoder** (AEVB; Kingma and Welling 2014; the *Raise your ELBO* tutorial), and "
        "its fully Bayesian version with a posterior over the decoder's weights;\n"
        "3. a **Bayesian last layer** on a neural network, trained end to end inside the user's own "
        "`jax.jit`-ed loop, and fits `vmap`ped over seeds."
    ),
    install("plots", "datasets"),
    code(
        "import os, time\n"
        "import jax\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n"
        "import matplotlib.pyplot as plt\n"
        "from jax.scipy.special import gammaln\n"
        "from vijax import expfam\n"
        "from vijax.inference import make_algorithm\n"
        "from vijax.models import Local, conjugate_model\n"
        "SMALL = os.environ.get('VIJAX_NOTEBOOK_SMALL') == '1'   # the test suite runs a small version"
    ),
    md(
        "## 1. A conjugate model from its log-joint\n\n"
        "A mixture of Poissons with a Dirichlet prior on the weights and Gamma priors on the rates is not a "
        "model vijax ships. Its log-joint for one datum, $\\log p(x_n, z_n \\mid \\pi, \\lambda) = \\sum_k z_{nk}"
        "(\\log \\pi_k + x_n \\log\\lambda_k - \\lambda_k) - \\log x_n!$, is **linear in each variable's "
        "sufficient statistics**: $\\log \\pi$ (Dirichlet), $(\\log\\lambda, \\lambda)$ (Gamma) and the one-hot "
        "$z_n$ (Categorical). That is conditional conjugacy. Written in those statistics — the layout of each "
        "family's `mean_params()` — the expected log-joint under mean-field $q$ is the log-joint at the mean "
        "parameters, and its gradients are the updates: $\\nabla_{E[z_n]}$ gives $q(z_n)$'s logits, "
        "$\\sum_n \\nabla_{E[t(\\beta)]}$ the global statistics."
    ),
    code(
        "rng = np.random.default_rng(0)\n"
        "x = x_counts = jnp.asarray(np.concatenate([rng.poisson(2.0, 300), rng.poisson(9.0, 200), rng.poisson(25.0, 100)]), jnp.float32)\n"
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
        "        state, info = step(jax.random.PRNGKey(t), state, batch)\n"
        "        elbos.append(float(info.elbo))\n"
        "    results[name] = (state, elbos)\n"
        "    rates = np.sort(np.asarray(state.q_global['rate'].mean_params()[1]))\n"
        "    print(f'{name:5}  E[rate] = {np.round(rates, 2)}   (truth 2, 9, 25)')"
    ),
    code(
        "fig, ax = plt.subplots(figsize=(6, 3))\n"
        "for name, (_, elbos) in results.items():\n"
        "    ax.plot(elbos, label=name)\n"
        "ax.set_xlabel('step'); ax.set_ylabel('ELBO (estimate)'); ax.set_ylim(np.percentile(results['cavi'][1], 5) - 200, None)\n"
        "ax.legend(); plt.show()\n"
        "assert np.all(np.diff(results['cavi'][1]) >= -1e-3 * abs(results['cavi'][1][-1]))   # CAVI never decreases"
    ),
    md(
        "A log-joint that is **not** conjugate is refused with the variable named — here $E[\\lambda]^2$ "
        "stands where a statistic would have to:"
    ),
    code(
        "def not_conjugate(g, l, x):\n"
        "    log_rate, rate = g['rate']\n"
        "    (z,) = l['z']\n"
        "    return jnp.sum(z * (x * log_rate - rate ** 2))\n"
        "try:\n"
        "    conjugate_model(not_conjugate, priors={'rate': model.priors['rate']}, locals=model.locals, example=x)\n"
        "except ValueError as err:\n"
        "    print('ValueError:', err)"
    ),
]

VAE = [
    md(
        "## 2. A VAE on scikit-learn's digits, and its fully Bayesian version\n\n"
        "AEVB (Kingma and Welling 2014; the *Raise your ELBO* tutorial, §AEVB) replaces each datum's local "
        "$q(z_n)$ by an encoder network $q_\\phi(z_n \\mid x_n) = \\mathcal N(\\mu_\\phi(x_n), \\mathrm{diag}\\,"
        "\\sigma_\\phi(x_n)^2)$ and fits it with the decoder $p_\\theta(x_n \\mid z_n)$ by stochastic gradients "
        "of the reparameterized ELBO, the KL to $p(z) = \\mathcal N(0, I)$ in closed form. The **fully Bayesian** "
        "version (§Fully Bayesian AEVB) also puts a mean-field Gaussian $q(\\theta)$ on the decoder's weights, "
        "with $\\mathrm{KL}(q(\\theta)\\,\\|\\,p(\\theta))$ subtracted once per step. Networks are "
        "`vijax.models.Network`s: `mlp` here, `from_equinox(module)` for an Equinox module."
    ),
    code(
        "from vijax.data import load_digits_images\n"
        "from vijax.inference import aevb, elbo, iwae_log_likelihood, reconstruct, sample\n"
        "from vijax.models import VAE, mlp\n"
        "\n"
        "digits = load_digits_images(seed=0, binarize=True)\n"
        "x_train, x_test = jnp.asarray(digits.x_train), jnp.asarray(digits.x_test)\n"
        "N, D, d = x_train.shape[0], x_train.shape[1], 2\n"
        "k_enc, k_dec = jax.random.split(jax.random.PRNGKey(1))\n"
        "vae = VAE(mlp(k_enc, (D, 64, 2 * d)), mlp(k_dec, (d, 64, D)), latent_dim=d, data_dim=D, likelihood='bernoulli')\n"
        "steps = 300 if SMALL else 6000\n"
        "\n"
        "def fit(alg, key):\n"
        "    k_init, k_run = jax.random.split(key)\n"
        "    def body(state, k):\n"
        "        k_batch, k_step = jax.random.split(k)\n"
        "        batch = x_train[jax.random.choice(k_batch, N, (100,), replace=False)]\n"
        "        return alg.step(k_step, state, batch)\n"
        "    state, info = jax.jit(lambda s, ks: jax.lax.scan(body, s, ks))(alg.init(k_init, x_train[:100]), jax.random.split(k_run, steps))\n"
        "    return state, info.elbo / 100 * 1.0   # per-datum ELBO estimates (scaled N/M: divide by N)\n"
        "\n"
        "fits = {}\n"
        "for name, bayes in [('AEVB', False), ('fully Bayesian AEVB', True)]:\n"
        "    alg = aevb(vae, num_data=N, schedule=3e-3, bayesian_decoder=bayes, init_scale=0.01)\n"
        "    t0 = time.perf_counter()\n"
        "    state, _ = fit(alg, jax.random.PRNGKey(2))\n"
        "    k_e, k_iw = jax.random.split(jax.random.PRNGKey(3))\n"
        "    test_elbo = float(jnp.mean(elbo(alg, k_e, state.q_global, x_test, num_samples=10)))\n"
        "    iw = np.array([np.asarray(iwae_log_likelihood(alg, k, state, x_test, num_samples=200 if SMALL else 1000))\n"
        "                   for k in jax.random.split(k_iw, 3)])          # 3 independent repeats\n"
        "    fits[name] = (alg, state)\n"
        "    print(f'{name:20}  test ELBO {test_elbo:8.2f}   IW log-lik {iw.mean():8.2f} '\n"
        "          f'(SE over test points {iw.mean(0).std() / np.sqrt(iw.shape[1]):.2f}, sd over repeats {iw.mean(1).std():.3f})'\n"
        "          f'   {time.perf_counter() - t0:.0f} s')\n"
        "    assert iw.mean() > test_elbo   # the importance-weighted bound is tighter than the ELBO"
    ),
    code(
        "alg, state = fits['AEVB']\n"
        "recon = np.asarray(reconstruct(alg, state, x_test[:8]))\n"
        "samples = np.asarray(sample(alg, jax.random.PRNGKey(4), state, 8))\n"
        "fig, axes = plt.subplots(3, 8, figsize=(8, 3.2))\n"
        "for j in range(8):\n"
        "    for i, (img, label) in enumerate([(x_test[j], 'data'), (recon[j], 'reconstruction'), (samples[j], 'sample')]):\n"
        "        axes[i, j].imshow(np.asarray(img).reshape(8, 8), cmap='gray_r', vmin=0, vmax=1); axes[i, j].axis('off')\n"
        "        if j == 0: axes[i, j].set_title(label, fontsize=8, loc='left')\n"
        "plt.show()"
    ),
    md("An encoder whose output does not fit the latent dimension is refused before anything compiles:"),
    code(
        "try:\n"
        "    VAE(mlp(k_enc, (D, 64, 3)), mlp(k_dec, (d, 64, D)), latent_dim=d, data_dim=D)\n"
        "except ValueError as err:\n"
        "    print('ValueError:', err)"
    ),
]

COMPOSITION = [
    md(
        "## 3. vijax inside a larger model: a Bayesian last layer, trained end to end\n\n"
        "`bayesian_last_layer(net, example, ...)` puts a full-rank Gaussian $q(W)$ on a logistic head over a "
        "network's features. Its `elbo(net_params, vparams, batch, key)` is an ordinary differentiable JAX "
        "function, so the network's parameters (a point estimate) and $q$'s are trained together by "
        "`jax.grad` and optax in the user's own jitted loop: the gradient reaches the network through the "
        "ELBO. The data are XOR-like, which no linear head on the raw inputs separates."
    ),
    code(
        "import optax\n"
        "from vijax.inference import bayesian_last_layer\n"
        "\n"
        "k_data, k_net, k_head, k_fit, k_eval = jax.random.split(jax.random.PRNGKey(0), 5)\n"
        "x_all = jax.random.normal(k_data, (400, 2))\n"
        "y_all = jnp.where(x_all[:, 0] * x_all[:, 1] > 0, 1.0, 0.0)\n"
        "x, y, x_te, y_te = x_all[:200], y_all[:200], x_all[200:], y_all[200:]\n"
        "net = mlp(k_net, [2, 16, 8])\n"
        "head = bayesian_last_layer(net, x[0], likelihood='bernoulli', num_data=200)\n"
        "params = {'net': net.params, 'head': head.init(k_head)}\n"
        "opt = optax.adam(0.01)\n"
        "\n"
        "@jax.jit\n"
        "def train(params, keys):\n"
        "    def body(carry, key):\n"
        "        params, opt_state = carry\n"
        "        grads = jax.grad(lambda p: -head.elbo(p['net'], p['head'], (x, y), key))(params)\n"
        "        updates, opt_state = opt.update(grads, opt_state, params)\n"
        "        return (optax.apply_updates(params, updates), opt_state), None\n"
        "    return jax.lax.scan(body, (params, opt.init(params)), keys)[0][0]\n"
        "\n"
        "held_out = jax.jit(lambda p: jnp.mean(head.log_predictive(p['net'], p['head'], (x_te, y_te), k_eval, 200)))\n"
        "trained = train(params, jax.random.split(k_fit, 300 if SMALL else 1500))\n"
        "print(f'held-out mean log predictive: {float(held_out(params)):.3f} before, {float(held_out(trained)):.3f} after')\n"
        "g = jax.grad(lambda p: -head.elbo(p, params['head'], (x, y), k_fit))(params['net'])\n"
        "print('|dELBO/d(first layer weights)| =', float(jnp.abs(g[0]['w']).sum()), '(the gradient reaches the network)')\n"
        "assert float(held_out(trained)) > float(held_out(params))"
    ),
    md(
        "### Many seeds, one program\n\n"
        "A whole fit — `init` and a `lax.scan` of steps — is a function of its key, so `jax.vmap` runs several "
        "seeds as one compiled program (here the Poisson mixture of part 1 by SVI: restarts whose ELBOs show "
        "which local optimum each seed found)."
    ),
    code(
        "svi_alg = make_algorithm('svi', model, num_data=x_counts.shape[0], schedule=0.5)\n"
        "\n"
        "def fit_seed(key):\n"
        "    k_init, k_run = jax.random.split(key)\n"
        "    def body(state, k):\n"
        "        state, info = svi_alg.step(k, state, x_counts)\n"
        "        return state, info.elbo\n"
        "    return jax.lax.scan(body, svi_alg.init(k_init, x_counts), jax.random.split(k_run, 30))\n"
        "\n"
        "states, elbos = jax.jit(jax.vmap(fit_seed))(jax.random.split(jax.random.PRNGKey(7), 4))\n"
        "print('final ELBO per seed:', np.round(np.asarray(elbos[:, -1]), 1))\n"
        "print('E[rate] per seed:\\n', np.round(np.sort(np.asarray(states.q_global['rate'].mean_params()[1]), axis=1), 2))"
    ),
]

cells = DERIVED + VAE + COMPOSITION
write(cells, "notebooks/06_vae_and_composition.ipynb")
