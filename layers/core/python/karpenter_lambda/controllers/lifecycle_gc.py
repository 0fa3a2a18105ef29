"""Garbage collection of orphan instances, run by the lifecycle sweep (:mod:`.lifecycle`).

``terminate_orphans(lifecycle, nodeclaims, instances, now, report)``: this deployment's instances (by providerID)
that no NodeClaim's providerID names, whose NodeClaim (by the ``karpenter.sh/nodeclaim`` tag) may not still adopt
them, older than ``lifecycle.orphan_min_age``, are terminated.  Returns the NodeClaims as they are after the sweep's
per-NodeClaim work (read once here, used by the rest of the sweep).
"""

from __future__ import annotations

from ..api.labels import NODECLAIM_TAG
from ..api.times import to_epoch
from ..cloudprovider import GONE_STATES, instance_state, instance_tags
from .cluster_state import instance_id_of


def terminate_orphans(lc, nodeclaims: dict, instances: dict[str, dict], now: float, report) -> dict:
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
    return current
