"""The drain's rules (pure): which pods are drained, in which order, and when one is deleted instead of evicted.

Karpenter v1's termination (pkg/controllers/node/termination/terminator):

* **skipped** (never evicted, never waited for): mirror/static pods, terminal pods (Succeeded/Failed), and pods
  that tolerate the ``karpenter.sh/disrupted:NoSchedule`` taint (they chose to stay until the node goes);
* **groups**, each evicted only once every pod of the earlier groups is gone: 0 non-critical non-DaemonSet,
  1 non-critical DaemonSet, 2 critical non-DaemonSet, 3 critical DaemonSet (critical = priority class
  ``system-cluster-critical`` or ``system-node-critical``);
* a pod already terminating is waited for, never evicted again; a pod whose ``karpenter.sh/do-not-disrupt``
  still holds is not evicted; a 429 from a PodDisruptionBudget is retried on the next step;
* with a ``terminationGracePeriod`` (deadline = deletion time + TGP) a remaining pod is **deleted** once
  ``now >= deadline - its terminationGracePeriodSeconds`` (so it still gets its own grace period), whatever
  PDBs and do-not-disrupt say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api.kube import is_critical, is_mirror_pod, is_terminal, is_terminating, owner_kinds, pod_uid
from ..scheduling.reschedule import DISRUPTED_TAINT
from ..scheduling.taints import tolerates
from .candidates import do_not_disrupt_until

GROUPS = ("non-critical", "non-critical DaemonSet", "critical", "critical DaemonSet")
DEFAULT_POD_GRACE = 30


def tolerates_disrupted(pod: dict) -> bool:
    return tolerates((pod.get("spec") or {}).get("tolerations"), [DISRUPTED_TAINT])


def drainable(pod: dict) -> bool:
    return not is_mirror_pod(pod) and not is_terminal(pod) and not tolerates_disrupted(pod)


def eviction_group(pod: dict) -> int:
    return (2 if is_critical(pod) else 0) + (1 if "DaemonSet" in owner_kinds(pod) else 0)


def pod_grace(pod: dict) -> int:
    v = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(v) if isinstance(v, (int, float)) and v >= 0 else DEFAULT_POD_GRACE


@dataclass
class DrainStep:
    evict: list[dict] = field(default_factory=list)       # evict now (Eviction API)
    delete: list[dict] = field(default_factory=list)      # delete now (the terminationGracePeriod deadline)
    waiting: list[dict] = field(default_factory=list)     # terminating, blocked, or in a later group
    blocked: dict[str, str] = field(default_factory=dict)  # pod uid -> why it is not evicted now
    group: int | None = None                              # the group being drained (None: nothing left)

    @property
    def done(self) -> bool:
        return self.group is None


def next_step(pods: list[dict], now: float, deadline: float | None, deleted: set[str] | frozenset = frozenset()
              ) -> DrainStep:
    """What to do with the node's pods now.  ``deleted``: uids already deleted at the deadline (not again)."""
    step = DrainStep()
    left = [p for p in pods if drainable(p)]
    if not left:
        return step
    step.group = min(eviction_group(p) for p in left)
    for p in left:
        uid = pod_uid(p)
        if deadline is not None and now >= deadline - pod_grace(p) and uid not in deleted and not is_terminating(p):
            step.delete.append(p)
            continue
        if eviction_group(p) != step.group or is_terminating(p) or uid in deleted:
            step.waiting.append(p)
            continue
        until = do_not_disrupt_until(p)
        if until is not None and now < until:
            step.blocked[uid] = "do-not-disrupt"
            step.waiting.append(p)
            continue
        step.evict.append(p)
    return step
