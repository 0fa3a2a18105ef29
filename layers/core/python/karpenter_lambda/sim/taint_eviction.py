"""Kubernetes' taint-based eviction, as the simulated cluster's node controller does it.

A node whose ``Ready`` condition is ``False`` gets ``node.kubernetes.io/not-ready:NoExecute`` (``Unknown``:
``node.kubernetes.io/unreachable:NoExecute``) besides the ``NoSchedule`` one (:func:`.nodes.set_node_condition`).
Every pod without a toleration of that taint was given one for 300 s by the API server's DefaultTolerationSeconds
admission; DaemonSet pods tolerate it for ever (their controller adds the toleration), and so do mirror pods.  Once
a pod's time is up, the taint-eviction controller deletes it (a deletion, not an eviction: no PodDisruptionBudget
is asked), and its workload makes a new pending pod elsewhere.  Without this the pods of a failed node stayed bound
to it until node repair replaced it half an hour later.

:func:`due` is the rule (pure); :class:`~.simulator.Simulation` calls it on a ``noexecute`` timer.
"""

from __future__ import annotations

from ..api.kube import is_daemon_pod, is_mirror_pod, is_terminal, is_terminating

DEFAULT_TOLERATION_SECONDS = 300.0   # kube-apiserver --default-not-ready-toleration-seconds / -unreachable-

__all__ = ["DEFAULT_TOLERATION_SECONDS", "toleration_seconds", "due"]


def _matches(tol: dict, taint: dict) -> bool:
    if (tol.get("effect") or "") not in ("", taint["effect"]):
        return False
    key, op = tol.get("key") or "", tol.get("operator") or "Equal"
    if not key:
        return op == "Exists"
    return key == taint["key"] and (op == "Exists" or str(tol.get("value") or "") == str(taint.get("value") or ""))


def toleration_seconds(pod: dict, taint: dict) -> float | None:
    """How long ``pod`` stays on a node with the NoExecute ``taint``: None for ever (a toleration without
    ``tolerationSeconds``, a DaemonSet or mirror pod), the smallest ``tolerationSeconds`` of its matching tolerations,
    or the admission's default when none matches."""
    if is_daemon_pod(pod) or is_mirror_pod(pod):
        return None
    matching = [t for t in (pod.get("spec") or {}).get("tolerations") or () if isinstance(t, dict) and _matches(t, taint)]
    if not matching:
        return DEFAULT_TOLERATION_SECONDS
    if any(t.get("tolerationSeconds") is None for t in matching):
        return None
    return max(0.0, min(float(t["tolerationSeconds"]) for t in matching))


def due(pods: list[dict], taint: dict, waited: float) -> tuple[list[dict], float | None]:
    """(the pods to delete now, ``waited`` seconds after the taint came; the next wait at which another one's time
    is up, or None) for the pods bound to the node."""
    now, later = [], []
    for p in pods:
        if is_terminal(p) or is_terminating(p):
            continue
        secs = toleration_seconds(p, taint)
        if secs is None:
            continue
        if secs <= waited:
            now.append(p)
        else:
            later.append(secs)
    return now, (min(later) if later else None)
