"""Builds notebooks/02_online_lda.ipynb."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import code, install, md, write  # noqa: E402

cells = [
    md(
        "# Online LDA with natural-gradient SVI\n\n"
        "Stochastic variational inference for latent Dirichlet allocation (Blei et al. 2017, §4.3 and appendix C; "
        "Hoffman et al. 2010/2013): minibatches of documents, a local mean-field step per document, and the "
        "natural-gradient update $\\lambda \\leftarrow (1-\\rho_t)\\lambda + \\rho_t(\\eta + \\tfrac{D}{S}\\hat s)$ "
        "with $\\rho_t = (t + \\tau)^{-\\kappa}$. We fit a synthetic corpus with known topics, watch the held-out "
        "per-word log predictive climb, and print topics."
    ),
    install("plots"),
    code(
        "import os\n"
        "import jax, numpy as np, matplotlib.pyplot as plt\n"
        "import vijax\n"
        "from vijax.data import Minibatcher, sample_lda_corpus\n"
        "from vijax.inference import schedules, svi\n"
        "from vijax.metrics import corpus_document_completion, top_words, topic_recovery\n"
        "from vijax.models import LDA\n"
        "SMALL = os.environ.get('VIJAX_NOTEBOOK_SMALL') == '1'\n"
        "D, K, V = (2000, 8, 300) if SMALL else (20000, 20, 2000)"
    ),
    md(
        "## A corpus with known topics\nDocuments drawn from LDA itself; 5% held out, and each held-out "
        "document's tokens split in half for document completion."
    ),
    code(
        "sample = sample_lda_corpus(0, D, K, V, alpha=0.1, eta=0.05, doc_length_mean=80)\n"
        "train, test = sample.corpus.split_documents(0, 0.05)\n"
        "observed, heldout = test.split_tokens(1, 0.5)\n"
        "print(train, test)"
    ),
    md(
        "## SVI, driven by the runner\nThe minibatcher serves batches by update index (so a resumed run "
        "sees the same batches); the runner scans them in jitted chunks and evaluates between chunks."
    ),
    code(
        "model = LDA(K, V, alpha=0.1, eta=0.05)\n"
        "alg = svi(model, num_data=train.num_docs, schedule=schedules.robbins_monro(1.0, tau=16.0, kappa=0.7))\n"
        "mb = Minibatcher(train, 128, seed=0)\n"
        "def heldout_score(state):\n"
        "    r = corpus_document_completion(model, state.q_global, observed, heldout)\n"
        "    return {'heldout_per_word': r.log_prob / r.num_tokens}\n"
        "result = vijax.run.run(alg, jax.random.PRNGKey(0), host_batches=mb.host_batches,\n"
        "                       num_steps=150 if SMALL else 600, chunk_size=10, eval_fn=heldout_score,\n"
        "                       eval_every=10, progress=False)\n"
        "scores = [e['heldout_per_word'] for e in result.evals]\n"
        "print('held-out per-word log predictive: first %.3f, last %.3f' % (scores[0], scores[-1]))\n"
        "assert scores[-1] > scores[0]"
    ),
    code(
        "fig, ax = plt.subplots(1, 2, figsize=(11, 3.5))\n"
        "ax[0].plot([e['step'] * 128 for e in result.evals], scores, '.-')\n"
        "ax[0].set_xlabel('documents seen'); ax[0].set_ylabel('held-out per-word log predictive')\n"
        "ax[1].plot(result.trace['elbo']); ax[1].set_xlabel('SVI step'); ax[1].set_ylabel('minibatch ELBO estimate')\n"
        "plt.show()"
    ),
    md("## Topics\nSynthetic words are numbered; with a real corpus pass its vocabulary to `top_words`."),
    code(
        "topics = np.asarray(model.expected_topics(result.state.q_global))\n"
        "vocab = [f'w{i}' for i in range(V)]\n"
        "for k, words in enumerate(top_words(topics, vocab, n=8)):\n"
        "    print(k, ' '.join(words))\n"
        "rec = topic_recovery(np.asarray(sample.topics), topics)\n"
        "print('mean cosine similarity to the true topics (Hungarian-matched): %.3f' % rec.mean_cosine)"
    ),
    md(
        "The same fit runs from the command line: `vijax run configs/lda_synthetic.yaml`, and on the Wikipedia "
        "corpus `vijax run configs/lda_wiki.yaml` (needs the reference data)."
    ),
]
write(cells, "notebooks/02_online_lda.ipynb")
