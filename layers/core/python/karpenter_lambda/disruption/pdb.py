"""PodDisruptionBudgets (pure): how many evictions a PDB allows now, and which PDB blocks a pod.

The API server keeps ``status.disruptionsAllowed``; when a PDB has no status yet (a fresh object, or the
simulator's API server, which does not run the disruption controller) it is computed from the spec as the
disruption controller does: ``maxUnavailable`` (count or percentage, rounded up, of the pods' controllers'
replicas where known, else of the selected pods) minus the unhealthy pods, or the healthy pods minus
``minAvailable``.  Healthy = Running and Ready.

The ONE PDB allowance: the sweeps' blockers (:func:`pdb_index`, :func:`blocking_pdbs_in`), the drain
(``controllers/termination``) and the simulator's Eviction API (``sim/kubeapi``: :func:`disruptions_allowed`, and
:func:`blocking_pdb` for "may this pod be evicted now") all ask here.  Two rules, as upstream has two:

* **Karpenter's blockers** (core ``pkg/utils/pdb/pdb.go`` ``isEvictable``; :func:`blocking_pdbs_in`): a pod selected
  by more than one PDB is blocked whatever they allow (the Eviction API refuses it); else its PDB blocks it when it
  allows no disruption, whether the pod is Ready or not, unless the PDB sets ``unhealthyPodEvictionPolicy:
  AlwaysAllow`` and the pod's Ready condition is False.
* **the API server's Eviction** (kubernetes ``pkg/registry/core/pod/storage/eviction.go``; :func:`blocking_pdb`):
  a Pending, terminal or terminating pod is deleted without asking its PDB; a pod selected by several PDBs is an
  error 500 (:class:`MultiplePodDisruptionBudgets`); a not-Ready pod is evicted when its PDB's policy is
  ``AlwaysAllow`` or the application is not disrupted (``currentHealthy >= desiredHealthy > 0``); otherwise the
  PDB must allow a disruption.
"""

from __future__ import annotations

import math
from typing import Callable

from ..api.kube import is_terminal, is_terminating
from ..api.selectors import Selector

__all__ = ["pod_healthy", "pod_ready", "selects", "disruptions_allowed", "healthy_counts", "blocking_pdb",
           "pdb_index", "blocking_pdbs_in", "always_allows_unhealthy", "MultiplePodDisruptionBudgets",
           "MULTIPLE_PDBS_MESSAGE", "ALWAYS_ALLOW"]

ALWAYS_ALLOW = "AlwaysAllow"   # policy/v1 UnhealthyPodEvictionPolicyType
MULTIPLE_PDBS_MESSAGE = ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                         "support.")


class MultiplePodDisruptionBudgets(Exception):
    """The Eviction API's answer for a pod selected by more than one PDB: an internal error (500), whatever the
    budgets allow.  ``pdbs``: the selecting budgets."""

    def __init__(self, pdbs: list[dict]):
        super().__init__(MULTIPLE_PDBS_MESSAGE)
        self.pdbs = pdbs


def pod_healthy(pod: dict) -> bool:
    """Counted healthy by a PDB: Running, not terminating, Ready."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or is_terminating(pod):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def _ready_status(pod: dict) -> str | None:
    return next((c.get("status") for c in (pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)


def pod_ready(pod: dict) -> bool:
    """The API server's ``IsPodReady``: the Ready condition is True (phase and deletion not asked)."""
    return _ready_status(pod) == "True"


def always_allows_unhealthy(pdb: dict) -> bool:
    return (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW


def _scaled(value, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        try:
            return math.ceil(total * int(value[:-1]) / 100)
        except ValueError:
            return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def selects(pdb: dict, pod: dict) -> bool:
    pm, dm = pod.get("metadata") or {}, pdb.get("metadata") or {}
    if (pm.get("namespace") or "default") != (dm.get("namespace") or "default"):
        return False
    try:
        return Selector((pdb.get("spec") or {}).get("selector")).matches(pm.get("labels") or {})
    except ValueError:
        return False


def healthy_counts(pdb: dict, pods: list[dict],
                   scale: Callable[[dict], tuple[str, int] | None] | None = None) -> tuple[int, int, int]:
    """(currentHealthy, desiredHealthy, disruptionsAllowed) of ``pdb``: its status's numbers where the API server
    wrote them, else computed from its spec over ``pods`` (any pods; those it selects in its namespace, not terminal,
    count), as the disruption controller does: ``maxUnavailable`` (a count, or a percentage rounded up) -> desired =
    expected - it; ``minAvailable`` (same rounding) -> desired = it; neither -> desired 0; allowed = healthy - desired,
    never below 0.

    What "expected" is for ``maxUnavailable`` and a percentage ``minAvailable`` (the disruption controller's expected
    count): the ``replicas`` of the pods' controllers when ``scale`` names them (pod -> (controller key, replicas),
    or None: the pod counts itself), so a pod evicted and not yet replaced still counts as missing; else the selected
    pods.  An integer ``minAvailable`` counts the pods, as the controller does."""
    status = pdb.get("status") or {}
    given = [status.get(k) for k in ("currentHealthy", "desiredHealthy", "disruptionsAllowed")]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in given):
        return given[0], given[1], given[2]
    ns = (pdb.get("metadata") or {}).get("namespace") or "default"
    try:   # parsed once (as ``selects`` does per pod)
        sel = Selector((pdb.get("spec") or {}).get("selector"))
    except ValueError:
        sel = None
    selected = [p for p in pods if sel is not None and ((p.get("metadata") or {}).get("namespace") or "default") == ns
                and sel.matches((p.get("metadata") or {}).get("labels") or {}) and not is_terminal(p)]
    expected, healthy = len(selected), sum(1 for p in selected if pod_healthy(p))
    spec = pdb.get("spec") or {}
    by_scale = spec.get("maxUnavailable") is not None or str(spec.get("minAvailable") or "").endswith("%")
    if scale is not None and by_scale:
        controllers: dict[str, int] = {}
        unmanaged = 0
        for p in selected:
            found = scale(p)
            if found is None:
                unmanaged += 1
            else:
                controllers[found[0]] = found[1]
        expected = max(sum(controllers.values()) + unmanaged, 0)
    if spec.get("maxUnavailable") is not None:
        desired = expected - _scaled(spec["maxUnavailable"], expected)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = 0
    allowed = status["disruptionsAllowed"] if isinstance(given[2], int) else max(0, healthy - desired)
    return healthy, desired, allowed


def disruptions_allowed(pdb: dict, pods: list[dict],
                        scale: Callable[[dict], tuple[str, int] | None] | None = None) -> int:
    """Evictions ``pdb`` allows now: its ``status.disruptionsAllowed`` when the API server wrote one, else from its spec
    over ``pods`` (:func:`healthy_counts`); never below 0 when computed."""
    return healthy_counts(pdb, pods, scale)[2]


def blocking_pdb(pod: dict, pdbs: list[dict], pods: list[dict],
                 scale: Callable[[dict], tuple[str, int] | None] | None = None) -> dict | None:
    """The API server's Eviction of ``pod``: the PDB that refuses it (429), or None when it may be evicted now;
    raises :class:`MultiplePodDisruptionBudgets` (the API server's 500) when more than one PDB selects it.  A
    Pending, terminal or terminating pod is never held; a not-Ready one only when its PDB's policy is not
    ``AlwaysAllow`` and ``currentHealthy >= desiredHealthy > 0`` does not hold.  ``scale``: as
    :func:`disruptions_allowed` takes it."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase in ("Pending", "Succeeded", "Failed") or is_terminating(pod):
        return None
    selecting = [pdb for pdb in pdbs or () if selects(pdb, pod)]
    if len(selecting) > 1:
        raise MultiplePodDisruptionBudgets(selecting)
    if not selecting:
        return None
    pdb = selecting[0]
    healthy, desired, allowed = healthy_counts(pdb, pods, scale)
    if not pod_ready(pod) and (always_allows_unhealthy(pdb) or (healthy >= desired and desired > 0)):
        return None
    return pdb if allowed <= 0 else None


def pdb_index(snap, caches=None) -> list[tuple[dict, str, object, int]]:
    """(pdb, namespace, selector, disruptions allowed) for every PDB of ``snap``.  ``caches``: the snapshot's
    :class:`~.context.SnapshotCaches` (a sweep asks about thousands of pods; recounting a PDB's pods each time made
    that quadratic): computed once and kept there."""
    if caches is not None and caches.pdb_index is not None:
        return caches.pdb_index
    by_ns: dict[str, list[dict]] = {}
    for p in snap.pods:
        by_ns.setdefault((p.get("metadata") or {}).get("namespace") or "default", []).append(p)
    out = []
    for pdb in snap.pdbs or ():
        ns = (pdb.get("metadata") or {}).get("namespace") or "default"
        try:
            sel = Selector((pdb.get("spec") or {}).get("selector"))
        except ValueError:
            continue
        out.append((pdb, ns, sel, disruptions_allowed(pdb, by_ns.get(ns, []))))
    if caches is not None:
        caches.pdb_index = out
    return out


def blocking_pdbs_in(pod: dict, index) -> list[dict]:
    """Karpenter's rule (core ``pkg/utils/pdb/pdb.go`` ``isEvictable``) against a :func:`pdb_index`: the PDBs that
    keep ``pod`` from being evicted -- every selecting PDB when more than one selects it (the Eviction API supports
    one), else its PDB when it allows no disruption (a not-Ready pod too), unless that PDB's
    ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow`` and the pod's Ready condition is False.  The caller asks only
    about the pods a drain would evict (upstream ``IsEvictable``)."""
    if not index:
        return []
    meta = pod.get("metadata") or {}
    ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
    selecting = [(pdb, allowed) for pdb, pns, sel, allowed in index if pns == ns and sel.matches(labels)]
    if len(selecting) > 1:
        return [pdb for pdb, _ in selecting]
    for pdb, allowed in selecting:
        if always_allows_unhealthy(pdb) and _ready_status(pod) == "False":
            return []
        if allowed <= 0:
            return [pdb]
    return []
