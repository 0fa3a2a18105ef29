"""PodDisruptionBudgets (pure): how many evictions a PDB allows now, and which PDB blocks a pod.

The API server keeps ``status.disruptionsAllowed``; when a PDB has no status yet (a fresh object, or the
simulator's API server, which does not run the disruption controller) it is computed from the spec as the
disruption controller does: ``maxUnavailable`` (count or percentage, rounded up, of the pods' controllers'
replicas where known, else of the selected pods) minus the unhealthy pods, or the healthy pods minus
``minAvailable``.  Healthy = Running and Ready.

The ONE PDB allowance: the sweeps' blockers (:func:`pdb_index`, :func:`blocking_pdb_in`), the drain
(``controllers/termination``) and the simulator's Eviction API (``sim/kubeapi``: :func:`disruptions_allowed`, and
:func:`blocking_pdb` for "may this pod be evicted now") all ask here.
"""

from __future__ import annotations

import math
from typing import Callable

from ..api.kube import is_terminal, is_terminating
from ..api.selectors import Selector

__all__ = ["pod_healthy", "selects", "disruptions_allowed", "blocking_pdb", "pdb_index", "blocking_pdb_in"]


def pod_healthy(pod: dict) -> bool:
    """Counted healthy by a PDB: Running, not terminating, Ready."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or is_terminating(pod):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


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


def disruptions_allowed(pdb: dict, pods: list[dict],
                        scale: Callable[[dict], tuple[str, int] | None] | None = None) -> int:
    """Evictions ``pdb`` allows now: its ``status.disruptionsAllowed`` when the API server wrote one, else from its spec
    over ``pods`` (any pods; those it selects in its namespace, not terminal, count): ``maxUnavailable`` (a count,
    or a percentage rounded up) minus the unhealthy ones, or the healthy ones minus ``minAvailable`` (same
    rounding), or every healthy one when neither is set; never below 0.

    What "all" is for ``maxUnavailable`` and a percentage ``minAvailable`` (the disruption controller's expected
    count): the ``replicas`` of the pods' controllers when ``scale`` names them (pod -> (controller key, replicas),
    or None: the pod counts itself), so a pod evicted and not yet replaced still counts as missing; else the selected
    pods.  An integer ``minAvailable`` counts the pods, as the controller does."""
    status = pdb.get("status") or {}
    if isinstance(status.get("disruptionsAllowed"), int):
        return status["disruptionsAllowed"]
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
        return max(0, _scaled(spec["maxUnavailable"], expected) - (expected - healthy))
    if spec.get("minAvailable") is not None:
        return max(0, healthy - _scaled(spec["minAvailable"], expected))
    return max(0, healthy)


def blocking_pdb(pod: dict, pdbs: list[dict], pods: list[dict],
                 scale: Callable[[dict], tuple[str, int] | None] | None = None) -> dict | None:
    """The first PDB selecting ``pod`` that allows no eviction (an unhealthy pod is never held: the API server
    lets it be evicted); ``scale``: as :func:`disruptions_allowed` takes it."""
    if not pod_healthy(pod):
        return None
    for pdb in pdbs or ():
        if selects(pdb, pod) and disruptions_allowed(pdb, pods, scale) <= 0:
            return pdb
    return None


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


def blocking_pdb_in(pod: dict, index) -> dict | None:
    """:func:`blocking_pdb` against a :func:`pdb_index`."""
    if not index or not pod_healthy(pod):
        return None
    meta = pod.get("metadata") or {}
    ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
    for pdb, pns, sel, allowed in index:
        if pns == ns and allowed <= 0 and sel.matches(labels):
            return pdb
    return None
