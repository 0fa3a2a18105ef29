"""Garbage collection of orphan instances and the Nodes deleted with ``kubectl delete node``, run by the lifecycle
sweep (:mod:`.lifecycle`).

``terminate_orphans(lifecycle, nodeclaims, instances, now, report, nodes=())``: this deployment's instances (by
providerID) that no NodeClaim's providerID names, whose NodeClaim (by the ``karpenter.sh/nodeclaim`` tag) may not
still adopt them, older than ``lifecycle.orphan_min_age``, are terminated; then the deleting ``nodes`` that hold the
termination finalizer and that no NodeClaim names are finalized (:func:`finalize_orphan_nodes`).  Returns the
NodeClaims as they are after the sweep's per-NodeClaim work (read once here, used by the rest of the sweep).

``request_node_deletions(lifecycle, nodes, nodeclaims, report)``: a Node marked deleting (``kubectl delete node``:
the termination finalizer keeps it) whose NodeClaim is not deleting has its NodeClaim marked deleting (reason
``NodeDeleted``), as Karpenter's termination controller deletes the NodeClaim of a deleting Node; the termination
flow then drains it (PodDisruptionBudgets, ``terminationGracePeriod``), terminates the instance and removes the
finalizer.  Run before the sweep's capacity for user deletions, so the Node's pods get theirs first.
"""

from __future__ import annotations

from ..api.labels import NODECLAIM_TAG, NODEPOOL
from ..api.times import to_epoch
from ..cloudprovider import GONE_STATES, instance_state, instance_tags
from .cluster_state import as_dict, instance_id_of
from .termination import NODE_DELETED, has_termination_finalizer


def _deleting_with_finalizer(node: dict) -> bool:
    return bool((node.get("metadata") or {}).get("deletionTimestamp")) and has_termination_finalizer(node)


def request_node_deletions(lc, nodes, nodeclaims: dict, report) -> bool:
    """Mark deleting the NodeClaims of the Nodes being deleted (see the module doc); True when one was."""
    by_provider = {nc.status.get("providerID"): nc for nc in nodeclaims.values() if nc.status.get("providerID")}
    changed = False
    for node in nodes:
        nc = by_provider.get((node.get("spec") or {}).get("providerID"))
        if nc is None or nc.metadata.get("deletionTimestamp") or not _deleting_with_finalizer(node):
            continue
        name = node["metadata"]["name"]
        try:
            lc.terminator.request(nc, f"{NODE_DELETED}: node {name} was deleted")
        except Exception as e:  # noqa: BLE001 - the next sweep tries again
            report.errors.append(f"NodeClaim {nc.name} of deleted node {name}: {e}")
            continue
        changed = True
        lc._decision("node-deleted", f"node {name} is being deleted: deleting its NodeClaim {nc.name} (drained, "
                                     f"instance terminated, then the node's finalizer removed)",
                     nodeclaim=nc.name, node=name)
    return changed


def _ours(lc, node: dict, instance: dict | None) -> bool:
    """Is a Node whose NodeClaim is gone this deployment's?  Upstream Karpenter's Nodes carry the same finalizer (a
    migration runs both): its instance described with another owner is not ours; an instance EC2 no longer knows is
    ours unless this deployment runs beside Karpenter, where the Node's NodePool must be one of ours."""
    if instance is not None:
        return bool(getattr(lc.cloud, "owns", lambda _d: True)(instance))
    if not getattr(lc.cloud, "beside_karpenter", False):
        return True
    pool = ((node.get("metadata") or {}).get("labels") or {}).get(NODEPOOL)
    return bool(pool) and lc.store.get("NodePool", pool) is not None


def finalize_orphan_nodes(lc, nodes, nodeclaims: dict, instances: dict[str, dict], report) -> None:
    """Deleting Nodes with the termination finalizer whose NodeClaim is gone: drained, then released (Karpenter's
    termination controller without a NodeClaim), so none is held for ever.  Each is read again first (a NodeClaim
    finalized in this sweep released its Node already)."""
    named = {nc.status.get("providerID") for nc in nodeclaims.values() if nc.status.get("providerID")}
    for listed in nodes:
        if (listed.get("spec") or {}).get("providerID") in named or not _deleting_with_finalizer(listed):
            continue
        name = listed["metadata"]["name"]
        try:
            node = as_dict(lc.kube.get_node(name))
            if not node or not _deleting_with_finalizer(node):
                continue
            iid = instance_id_of((node.get("spec") or {}).get("providerID"))
            inst = instances.get(iid) if iid else None
            if iid and inst is None:
                inst = lc.cloud.describe([iid]).get(iid)
            if not _ours(lc, node, inst):
                continue
            lc.terminator.finalize_node(node, inst, report.errors)
        except Exception as e:  # noqa: BLE001 - the next sweep tries again
            report.errors.append(f"deleting node {name} without a NodeClaim: {e}")
        finally:
            report.evicted.extend(lc.terminator.actions)
            lc.terminator.actions.clear()


def terminate_orphans(lc, nodeclaims: dict, instances: dict[str, dict], now: float, report, nodes=()) -> dict:
    current = {nc.name: nc for nc in lc.store.list("NodeClaim")}
    claimed = {instance_id_of(nc.status.get("providerID")) for nc in [*nodeclaims.values(), *current.values()]
               if nc.status.get("providerID")}
    claimed |= {t["instanceId"] for t in report.terminated}   # handled by this sweep already
    for iid, inst in instances.items():
        if iid in claimed or instance_state(inst) in GONE_STATES:
            continue
        owner = instance_tags(inst).get(NODECLAIM_TAG)
        nc = current.get(owner) if owner else None
        if nc is None and owner:
            nc = lc.store.get("NodeClaim", owner)  # written after the listing above
        if nc is not None and not nc.status.get("providerID") and not nc.metadata.get("deletionTimestamp"):
            continue  # its NodeClaim is being launched (or will adopt it)
        if nc is not None and instance_id_of(nc.status.get("providerID")) == iid:
            continue
        launched = to_epoch(inst.get("LaunchTime")) or now
        if now - launched < lc.orphan_min_age:
            continue
        why = f"orphan: no NodeClaim {owner}" if nc is None else \
            f"orphan: NodeClaim {owner} runs on {instance_id_of(nc.status.get('providerID')) or 'no instance'}"
        lc._terminate(iid, owner, why, report)
    finalize_orphan_nodes(lc, nodes, current, instances, report)
    return current
