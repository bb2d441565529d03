"""The E-step x M-step matrix of seed 000 (§2.5, appendix D): any local step a model offers with
any global update, through one constructor.

Global updates ("M-steps"), all of the form lambda <- (1 - rho_t) lambda + rho_t lambda-hat with the
shared domain-guarded interpolation:

``"meanfield"``
  SVI (``vijax.inference.svi``): q(beta) q(z), the local step at E_q[t(beta)],
  lambda-hat = eta + (N_t/S) sum eta-hat.
``"ssvi"``
  SSVI (``vijax.inference._ssvi.ssvi(mode="full")``): the local step at t(beta), beta ~ q by
  inversion, lambda-hat = eta + V(beta, lambda) (N_t/S) sum eta-hat (eq. 11).
``"ssvi_a"``
  SSVI-A (``mode="approx"``): as SSVI without V (eq. 10).
``"map"``
  Stochastic MAP-EM, a point estimate of beta: the local step at t(beta-hat), beta-hat the mode of
  q(beta), and the same update as SVI, lambda-hat = eta + (N_t/S) sum eta-hat. lambda is then the
  natural parameter of the (stochastically averaged) conditional p(beta | y, E[z]) and beta-hat
  its mode: with rho = 1 and the full data set a step is exactly one EM step for the MAP estimate
  (E-step at beta-hat, M-step beta-hat <- argmax_beta p(beta) p(y, E[z] | beta)); with minibatches
  and Robbins-Monro rho_t it is online EM in the sufficient statistics (Cappe and Moulines 2009).
  Where q(beta) has no interior mode (Dirichlet concentration < 1) the mode is clipped to the
  boundary (see ``_ssvi._mode_stats``). ``info.elbo`` is the MAP-EM objective
  (N/S)(<sum eta-hat, t(beta-hat)> + local_terms) + log p(beta-hat), a lower bound on
  log p(y, beta-hat) estimated from the minibatch.

Local steps ("E-steps"): whatever ``model.local_methods`` offers ("meanfield", "exact" where the
local conditional is tractable, "gibbs", "cvb0", ...).

References:
  Hoffman and Blei (2015), seed 000 §2.5 and appendix D.
  Cappe and Moulines (2009), On-line expectation-maximization algorithm for latent data models.
"""
from __future__ import annotations

from vijax import expfam
from vijax.inference import _ssvi, _svi
from vijax.inference.base import VIAlgorithm, check_local
from vijax.inference.schedules import robbins_monro

GLOBAL_UPDATES = ("map", "meanfield", "ssvi", "ssvi_a")
_SETTINGS = {
    "map": ("schedule", "ramp"),
    "meanfield": ("schedule", "ramp", "hyper_step"),
    "ssvi": ("schedule", "ramp"),
    "ssvi_a": ("schedule", "ramp"),
}
_MODE_FAMILIES = (expfam.Dirichlet, expfam.Beta, expfam.Gamma, expfam.Normal)


def _check_map_model(model) -> None:
    import jax

    for f in jax.tree_util.tree_leaves(model.prior(), is_leaf=expfam.is_family):
        if not isinstance(f, _MODE_FAMILIES):
            raise ValueError(f"global_update='map' needs the mode of every global family; {type(model).__name__} "
                             f"has a {type(f).__name__} (implemented: Dirichlet, Beta, Gamma, Normal)")


def map_em(model, num_data: int, *, schedule=None, local: str = "meanfield", ramp: bool = False) -> VIAlgorithm:
    """Stochastic MAP-EM with a point estimate of the globals (the ``"map"`` row of the module
    docstring). State and info are ``SSVIState`` / ``SSVIInfo``.

    Raises:
      ValueError: for ``num_data`` < 1, a ``local`` method the model lacks, or global families
        without an implemented mode.
    """
    _svi.check_num_data(num_data)
    _ssvi.check_schedule_ramp(schedule, ramp)
    check_local(model, local)
    _check_map_model(model)
    schedule = schedule if schedule is not None else robbins_monro(1.0, tau=1.0, kappa=0.7)
    return VIAlgorithm(
        init=lambda key, batch=None: _ssvi.init(key, batch, model=model),
        step=lambda state, batch, key: _ssvi.global_step(state, batch, key, model=model, num_data=num_data,
                                                         schedule=schedule, local=local, update="map", ramp=ramp))


def build_algorithm(model, global_update: str, local: str, num_data: int, **settings) -> VIAlgorithm:
    """The algorithm of the E-step x M-step matrix for ``(global_update, local)``.

    Args:
      model: a ``ConditionallyConjugateModel``.
      global_update: ``"map"``, ``"meanfield"`` (SVI), ``"ssvi"`` or ``"ssvi_a"``.
      local: a local-step method in ``model.local_methods``.
      num_data: N.
      **settings: ``schedule`` (``count -> rho``; default ``robbins_monro(1.0, tau=1.0, kappa=0.7)``),
        ``ramp`` (bool); for ``"meanfield"`` also ``hyper_step``.

    Returns:
      A ``VIAlgorithm`` (init, step).

    Raises:
      ValueError: naming the problem, before anything compiles: an unknown ``global_update``, a
        ``local`` method the model does not offer, a setting the update does not take, or a model
        lacking what the combination needs (globals that cannot be sampled by inversion for
        SSVI/SSVI-A, or without a mode for MAP).

    Examples:
        >>> from vijax.models import LDA
        >>> alg = build_algorithm(LDA(3, 30), "ssvi_a", "cvb0", num_data=100)
        >>> build_algorithm(LDA(3, 30), "ssvi", "exact", num_data=100)
        Traceback (most recent call last):
        ...
        ValueError: local='exact' is not offered by LDA; choose one of ('meanfield', 'cvb0', 'gibbs')
    """
    if global_update not in GLOBAL_UPDATES:
        raise ValueError(f"global_update must be one of {GLOBAL_UPDATES}, got {global_update!r}")
    check_local(model, local)
    unknown = sorted(set(settings) - set(_SETTINGS[global_update]))
    if unknown:
        raise ValueError(f"global_update={global_update!r} takes the settings {_SETTINGS[global_update]}; "
                         f"got unknown {unknown}")
    if global_update == "meanfield":
        return _svi.as_top_level_api(model, num_data=num_data, local=local, **settings)
    if global_update == "map":
        return map_em(model, num_data, local=local, **settings)
    mode = "full" if global_update == "ssvi" else "approx"
    return _ssvi.as_top_level_api(model, num_data, local=local, mode=mode, **settings)


__all__ = ["GLOBAL_UPDATES", "build_algorithm", "map_em"]
