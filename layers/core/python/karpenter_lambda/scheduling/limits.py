"""NodePool limits: plan as if unlimited first, keep that plan when it fits the limits anyway.

The solver itself honours limits NodeClaim by NodeClaim (each charged its largest option as it is created, as
Karpenter does); :func:`solve_within_limits_unconstrained` is the cheaper path ``solve()`` tries first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..api import labels as L
from ..api.quantity import resource_value
from .model import SchedulingInput, SchedulingResult
from .requirements import Requirement

__all__ = ["LIMITED_OPTION_SPREAD", "solve_within_limits_unconstrained"]

# A NodeClaim of a limited NodePool keeps only options up to this many times its cheapest option's capacity in
# each limited resource, so what it counts against the limits (its largest option) stays close to what it uses.
LIMITED_OPTION_SPREAD = 2


def solve_within_limits_unconstrained(inp: SchedulingInput,
                                      run: Callable[[SchedulingInput], SchedulingResult]) -> SchedulingResult | None:
    """Plan as if the NodePools had no limits; keep that plan when it stays within them anyway.

    Limits make the packer conservative (each NodeClaim of a limited NodePool is charged its largest option as
    it is created, as Karpenter does, so nodes are sized for their own pods).  Most NodePools' limits are far
    from binding in one round: then the unconstrained plan, with each NodeClaim's options trimmed to sizes near
    its cheapest, is both cheaper and within the limits (every NodeClaim charged its largest remaining option,
    what the provisioner reserves).  None when it would not fit, or when minValues forbid trimming.  ``run``: one
    solver run (the solver's, passed in so that this module does not import it).
    """
    limits: dict[str, dict[str, int]] = {}
    pools = []
    for npi in inp.nodepools:
        np_ = npi.nodepool
        if np_.limits:
            try:
                limits[np_.name] = {k: resource_value(k, v) for k, v in np_.limits.items()}
            except (TypeError, ValueError):
                return None  # the constrained pass reports the bad limit
            free = np_.copy()
            free.spec.pop("limits", None)
            pools.append(replace(npi, nodepool=free))
        else:
            pools.append(npi)
    res = run(replace(inp, nodepools=pools))
    used = {name: dict((inp.nodepool_usage or {}).get(name) or {}) for name in limits}
    for plan in res.nodeclaims:
        lim = limits.get(plan.nodepool)
        if lim is None:
            continue
        if any(r.min_values for r in plan.requirements):
            return None
        cheapest = next((it for it in plan.instance_types if it.name == plan.instance_type), None)
        if cheapest is None:
            return None
        keys = [k for k in lim if k != "nodes"]
        kept = [it for it in plan.instance_types
                if all(it.capacity.get(k, 0) <= LIMITED_OPTION_SPREAD * cheapest.capacity.get(k, 0) for k in keys)]
        u = used[plan.nodepool]
        u["nodes"] = u.get("nodes", 0) + 1
        for k in keys:
            u[k] = u.get(k, 0) + max(it.capacity.get(k, 0) for it in kept)
        if any(u.get(k, 0) > v for k, v in lim.items()):
            return None
        if len(kept) < len(plan.instance_types):
            plan.instance_types = kept
            plan.requirements = plan.requirements.copy().add(
                Requirement(L.INSTANCE_TYPE, False, {it.name for it in kept}))
    return res
