"""The drain's rules (pure): which pods are drained, in which order, and when one is deleted instead of evicted.

Karpenter v1's termination (pkg/controllers/node/termination/terminator, pkg/utils/pod):

* **skipped** (never evicted, never waited for): mirror/static pods (owned by their Node), terminal pods
  (Succeeded/Failed), pods that tolerate the ``karpenter.sh/disrupted:NoSchedule`` taint (they chose to stay until
  the node goes; an ``operator: Exists`` toleration without a key tolerates it too), and pods stuck terminating
  (``deletionTimestamp`` more than a minute in the past: the kubelet is not going to finish them);
* **groups**, each evicted only once every pod of the earlier groups is *gone* (a terminating pod still counts):
  0 non-critical non-DaemonSet, 1 non-critical DaemonSet, 2 critical non-DaemonSet, 3 critical DaemonSet
  (critical = priority class ``system-cluster-critical`` or ``system-node-critical``);
* a pod already terminating is waited for, never evicted again; nor is a pod whose eviction was already accepted
  (``already["evicted"]``: the API may not show its deletionTimestamp yet);
* a pod whose ``karpenter.sh/do-not-disrupt`` is active (``"true"``, or a duration not yet elapsed since the pod
  started) is not evicted -- the drain waits for it;
* a 429 from a PodDisruptionBudget is the caller's business: it retries on the next step.  A 429 is a PDB block
  only when the API server says so (:func:`refused_by_budget`: the Status's ``details.causes`` has reason
  ``DisruptionBudget``, as the eviction REST handler sends, or its message names the disruption budget); any other
  429 is API-server throttling (API Priority and Fairness: "Too many requests", ``Retry-After``), which says
  nothing about the pod: the drain backs off and tries again;
* with a ``terminationGracePeriod`` (deadline = the NodeClaim's deletion time + TGP) a remaining pod of *any* group
  is **deleted** once ``now >= deadline - its terminationGracePeriodSeconds`` (default 30 s, so it still gets its own
  grace period before the node goes), whatever PDBs and do-not-disrupt say; never twice (``already["deleted"]``).
  A pod already terminating is deleted again then when its ``deletionTimestamp`` (the end of its grace) is after the
  deadline (core terminator.go ``Drain``, pkg/utils/pod ``IsPodEligibleForForcedEviction``); the delete's grace is
  what is left before the deadline, at least 1 s (:func:`deadline_grace`: 0 would remove the pod from etcd while
  its containers may still run).

Only the standard library and :mod:`karpenter_lambda.api` are used here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..api import labels as wk
from ..api.durations import DurationError, parse_go_duration
from ..api.kube import daemon_owner, is_critical, is_mirror_pod, is_terminal, is_terminating, pod_uid
from ..api.times import to_epoch
from ..scheduling.taints import tolerates_taint

__all__ = [
    "GROUPS", "DEFAULT_POD_GRACE", "STUCK_TERMINATING_AFTER", "DISRUPTED_NO_SCHEDULE",
    "tolerates_disrupted", "is_stuck_terminating", "drainable", "eviction_group", "pod_grace",
    "do_not_disrupt_active", "delete_at", "deadline_grace", "ends_after_deadline", "DrainStep", "next_step",
    "next_actions", "refused_by_budget", "DISRUPTION_BUDGET_CAUSE",
]
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"   # policy/v1 DisruptionBudgetCause (a StatusCause's "reason")

GROUPS = ("non-critical", "non-critical DaemonSet", "critical", "critical DaemonSet")
DEFAULT_POD_GRACE = 30
STUCK_TERMINATING_AFTER = 60.0
DISRUPTED_NO_SCHEDULE = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


def refused_by_budget(status: Mapping | None, message: str = "") -> bool:
    """Whether an eviction's 429 answer (its Status body, or only its message) is a PodDisruptionBudget refusal.

    The API server's eviction handler answers a budget refusal with reason TooManyRequests, the message "Cannot evict
    pod as it would violate the pod's disruption budget." and a ``details.causes`` entry of reason
    ``DisruptionBudget``; API Priority and Fairness throttling answers "Too many requests, please try again later."
    with a ``Retry-After`` header and no cause."""
    status = status or {}
    for cause in ((status.get("details") or {}).get("causes") or []):
        if (cause or {}).get("reason") == DISRUPTION_BUDGET_CAUSE or (cause or {}).get("type") == DISRUPTION_BUDGET_CAUSE:
            return True
    text = f"{status.get('message') or ''} {message or ''}".lower()
    return "disruption budget" in text


def tolerates_disrupted(pod: dict) -> bool:
    """Does the pod tolerate ``karpenter.sh/disrupted:NoSchedule``?  (Karpenter leaves such pods alone.)"""
    return tolerates_taint([t or {} for t in (pod.get("spec") or {}).get("tolerations") or []], DISRUPTED_NO_SCHEDULE)


def is_stuck_terminating(pod: dict, now: float) -> bool:
    """Terminating for more than a minute past its deletionTimestamp (deletion time + grace)."""
    ts = to_epoch((pod.get("metadata") or {}).get("deletionTimestamp"))
    return ts is not None and now - ts > STUCK_TERMINATING_AFTER


def drainable(pod: dict, now: float | None = None) -> bool:
    """A pod the drain evicts or waits for (Karpenter's ``IsWaitingEviction``); ``now`` enables the stuck rule."""
    if is_mirror_pod(pod) or is_terminal(pod) or tolerates_disrupted(pod):
        return False
    return now is None or not is_stuck_terminating(pod, now)


def eviction_group(pod: dict) -> int:
    """0 non-critical, 1 non-critical DaemonSet, 2 critical, 3 critical DaemonSet."""
    return (2 if is_critical(pod) else 0) + (1 if daemon_owner(pod) == "DaemonSet" else 0)


def pod_grace(pod: dict) -> int:
    v = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else DEFAULT_POD_GRACE


def do_not_disrupt_active(pod: dict, now: float) -> bool:
    """``karpenter.sh/do-not-disrupt``: ``"true"`` always holds; a duration holds until it has elapsed since the pod
    started (no start time: holds); anything else is ignored (as Karpenter does)."""
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(wk.DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    try:
        d = float(parse_go_duration(value))
    except (DurationError, ValueError, TypeError):
        return False
    if d <= 0:
        return False
    start = to_epoch((pod.get("status") or {}).get("startTime"))
    return True if start is None else now - start < d


#: the lifecycle sweep's period (the drain's next look): a pod due for deletion before then is deleted now
DELETE_LEAD = 60.0


def delete_at(pod: dict, deadline: float | None) -> float | None:
    """When the pod is deleted instead of evicted: ``deadline - terminationGracePeriodSeconds`` (None: never)."""
    return None if deadline is None else deadline - pod_grace(pod)


def ends_after_deadline(pod: dict, deadline: float | None) -> bool:
    """A terminating pod whose deletion (its ``deletionTimestamp``: the request's time plus its grace) ends after the
    node's deadline: the drain deletes it again with a shorter grace (upstream ``IsPodEligibleForForcedEviction``)."""
    ts = to_epoch((pod.get("metadata") or {}).get("deletionTimestamp"))
    return deadline is not None and ts is not None and ts > deadline


def deadline_grace(pod: dict, now: float, deadline: float | None) -> int | None:
    """``gracePeriodSeconds`` of the deadline's delete: the seconds left before ``deadline``, at least 1 (never a
    force deletion from etcd while the pod's containers may still run; core terminator.go ``DeleteExpiringPods``);
    None (the pod's own grace) without a deadline, or when the pod's own grace fits and it is not terminating."""
    if deadline is None:
        return None
    grace = max(1, int(deadline - now))
    return None if grace >= pod_grace(pod) and not is_terminating(pod) else grace


@dataclass
class DrainStep:
    evict: list[dict] = field(default_factory=list)       # evict now (Eviction API)
    delete: list[dict] = field(default_factory=list)      # delete now (the terminationGracePeriod deadline)
    waiting: list[dict] = field(default_factory=list)     # terminating, already handled, held, or in a later group
    blocked: dict[str, str] = field(default_factory=dict)  # pod uid -> why it is not evicted now
    group: int | None = None                              # the group being drained (None: nothing left)

    @property
    def done(self) -> bool:
        return self.group is None


def _uids(already: Mapping | Iterable[str] | None, key: str) -> set[str]:
    if not already:
        return set()
    if isinstance(already, Mapping):
        return set(already.get(key) or ())
    return set(already)


def next_step(pods: list[dict], now: float, deadline: float | None,
              deleted: Iterable[str] = frozenset(), evicted: Iterable[str] = frozenset(),
              lead: float = 0.0) -> DrainStep:
    """What to do with the node's pods now.  ``deleted`` / ``evicted``: uids already deleted / evicted earlier.
    ``lead``: how long until the drain is looked at again (:data:`DELETE_LEAD`): a pod whose delete time falls before
    then is deleted now, with its whole grace period, rather than then with less (Karpenter deletes it at
    ``deadline - terminationGracePeriodSeconds`` to give it the full grace)."""
    deleted, evicted = set(deleted), set(evicted)
    step = DrainStep()
    left = [p for p in pods if drainable(p, now)]
    if not left:
        return step
    step.group = min(eviction_group(p) for p in left)
    for p in left:
        uid = pod_uid(p)
        at = delete_at(p, deadline)
        if at is not None and now + lead >= at and uid not in deleted and (
                not is_terminating(p) or ends_after_deadline(p, deadline)):
            step.delete.append(p)      # the deadline: whatever group, PDB or do-not-disrupt
            continue
        if eviction_group(p) != step.group or is_terminating(p) or uid in deleted or uid in evicted:
            step.waiting.append(p)
            continue
        if do_not_disrupt_active(p, now):
            step.blocked[uid] = "do-not-disrupt"
            step.waiting.append(p)
            continue
        step.evict.append(p)
    return step


def next_actions(pods: list[dict], now: float, deadline: float | None,
                 already: Mapping | Iterable[str] | None = None) -> tuple[list[dict], list[dict], list[dict]]:
    """``(evict, delete, waiting)`` for the node's pods now.  ``already``: the drain's record (a mapping with
    ``evicted`` and ``deleted`` uid collections, e.g. ``status.termination``) or a plain set of uids handled before.
    Everything empty: the node is drained."""
    step = next_step(pods, now, deadline, deleted=_uids(already, "deleted"), evicted=_uids(already, "evicted"))
    return step.evict, step.delete, step.waiting
