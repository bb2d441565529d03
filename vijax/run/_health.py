"""What a run's trace says about non-finite ELBOs and rejected updates (``info.accepted`` False)."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np

from vijax.metrics import KHAT_THRESHOLD


class RunHealth(NamedTuple):
    """What a run's trace says about non-finite values (``run_health``).

    Attributes:
      num_steps: rows of the trace.
      nonfinite_steps: the ``step`` numbers whose ELBO is not finite (in any element).
      rejected_steps: the steps whose ``accepted`` / ``*.accepted`` field is False in any element.
      rejected_share: the share of rejected updates (over elements), 0 without ``accepted``.
      final_step: the last step whose update was applied, or None.
      final_elbo_finite: whether that step's ELBO is finite (False without such a step).
    """

    num_steps: int
    nonfinite_steps: np.ndarray
    rejected_steps: np.ndarray
    rejected_share: float
    final_step: Optional[int]
    final_elbo_finite: bool

    def problems(self, max_rejected_share: Optional[float] = None) -> list[str]:
        """One line per problem: a non-finite final ELBO, more than ``max_rejected_share`` of the steps rejected."""
        out = []
        if self.num_steps and not self.final_elbo_finite:
            where = f"at step {self.final_step}" if self.final_step is not None else "(no step was applied)"
            first = f"; first non-finite at step {int(self.nonfinite_steps[0])}" if self.nonfinite_steps.size else ""
            out.append(f"the run ended with a non-finite ELBO {where}{first}")
        if max_rejected_share is not None and self.rejected_share > max_rejected_share:
            out.append(
                f"{self.rejected_share:.1%} of the updates were rejected as non-finite (more than "
                f"run.max_rejected_share = {max_rejected_share:g}); first at step {int(self.rejected_steps[0])}"
            )
        return out

    def notes(self) -> list[str]:
        """Lines describing non-finite ELBOs and rejected steps (empty when there were none)."""

        def listed(steps: np.ndarray) -> str:
            shown = ", ".join(str(int(t)) for t in steps[:5])
            return (
                f"step {shown}"
                if steps.size == 1
                else f"steps {shown}" + (f", ..., {int(steps[-1])}" if steps.size > 5 else "")
            )

        out = []
        if self.nonfinite_steps.size:
            out.append(
                f"ELBO not finite at {self.nonfinite_steps.size} of {self.num_steps} steps ({listed(self.nonfinite_steps)})"
            )
        if self.rejected_steps.size:
            out.append(
                f"{self.rejected_steps.size} of {self.num_steps} steps rejected as non-finite ({listed(self.rejected_steps)})"
            )
        return out


def applied_steps(trace: Mapping) -> tuple[np.ndarray, float]:
    """``(applied, rejected_share)``: per trace row whether every ``accepted`` element is True, and the share not."""
    n = len(np.asarray(trace.get("step", np.zeros((0,)))))
    names = [k for k in trace if k == "accepted" or k.endswith(".accepted")]
    if not names or n == 0:
        return np.ones(n, bool), 0.0
    acc = np.concatenate([np.asarray(trace[k]).reshape(n, -1).astype(bool) for k in names], axis=1)
    return np.all(acc, axis=1), float(1.0 - acc.mean()) if acc.size else 0.0


def run_health(trace: Mapping) -> RunHealth:
    """Non-finite ELBOs and rejected steps in a ``RunResult.trace`` (see ``RunHealth``)."""
    steps = np.asarray(trace.get("step", np.zeros((0,), np.int64)))
    n = len(steps)
    elbo = np.asarray(trace.get("elbo", np.zeros((n,))), dtype=np.float64).reshape(n, -1 if n else 1)
    finite = np.all(np.isfinite(elbo), axis=1)
    applied, share = applied_steps(trace)
    idx = np.flatnonzero(applied)
    final = int(idx[-1]) if idx.size else None
    final_step = None if final is None else int(steps[final])
    return RunHealth(n, steps[~finite], steps[~applied], share, final_step, final is not None and bool(finite[final]))


def psis_note(evals: Sequence[dict]) -> Optional[str]:
    """The last evaluation's PSIS ``"khat"`` against ``KHAT_THRESHOLD`` = 0.7 (Yao et al. 2018), or None."""
    if not evals or "khat" not in evals[-1] or evals[-1]["khat"] is None:
        return None
    k = float(evals[-1]["khat"])
    if k > KHAT_THRESHOLD:
        return (
            f"PSIS k-hat {k:.3g} is above {KHAT_THRESHOLD}: q's importance weights have a heavy tail, and "
            "its posterior estimates are not to be trusted (Yao et al. 2018)"
        )
    return f"PSIS k-hat {k:.3g} <= {KHAT_THRESHOLD}: q passes the diagnostic"
