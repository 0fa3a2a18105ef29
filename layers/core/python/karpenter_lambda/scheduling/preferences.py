"""Preference relaxation (Karpenter's ``preferences.go``): when a pod class cannot be placed, one preference is
dropped and the class is tried again.  The order is Karpenter's:

1. the next of its ORed required node-affinity terms (a term that cannot be met is given up for the next);
2. preferred pod affinity, then preferred pod anti-affinity (the heaviest first);
3. preferred node affinity (the heaviest first);
4. ScheduleAnyway topology spread;
5. finally PreferNoSchedule taints are tolerated (when some NodePool has one, as Karpenter).
"""

from __future__ import annotations

from . import topology as T
from .podfacts import PodClass

__all__ = ["relax"]


def relax(c: PodClass, prefer_no_schedule: bool = True) -> str | None:
    """Relax one preference of ``c`` in Karpenter's order; the step's text, or None when nothing is left to relax.
    ``prefer_no_schedule``: whether some NodePool has a PreferNoSchedule taint; Karpenter tolerates those taints as
    the last step only then (``scheduler.go``), so a node tainted PreferNoSchedule by someone else is not used."""
    if c.terms and c.term_idx < len(c.terms) - 1:
        c.term_idx += 1
        c.reqs = c.effective_reqs()
        c.sig = c.reqs.signature()
        return "required node affinity term dropped"
    for kind, label in ((T.AFFINITY, "preferred pod affinity"), (T.ANTI, "preferred pod anti-affinity")):
        cand = [(con.weight, -i, i) for i, (con, _, _) in enumerate(c.cons)
                if con.kind == kind and not con.required and i not in c.dropped]
        if cand:
            c.dropped.add(max(cand)[2])
            return f"{label} dropped"
    if c.pref_drop < len(c.preferred):
        c.pref_drop += 1
        c.reqs = c.effective_reqs()
        c.sig = c.reqs.signature()
        return "preferred node affinity dropped"
    for i, (con, _, _) in enumerate(c.cons):
        if con.kind == T.SPREAD and not con.required and i not in c.dropped:
            c.dropped.add(i)
            return "ScheduleAnyway topology spread dropped"
    if not c.tolerate_pns and prefer_no_schedule:
        c.tolerate_pns = True
        return "PreferNoSchedule taints tolerated"
    return None
