"""Drift (pure): is a NodeClaim still what its NodePool and EC2NodeClass would launch today?

Karpenter's checks, in its order (pkg/controllers/nodeclaim/disruption/drift.go, then the AWS provider's
``IsDrifted``; the first that fires is the reason):

1. ``NodePoolDrifted``: the NodePool template hash (``karpenter.sh/nodepool-hash``) differs from the one stamped on
   the NodeClaim at launch, when both were computed with the same hash version (a version change re-stamps,
   never drifts).
2. ``RequirementsDrifted``: the NodeClaim's labels (with its Node's) no longer satisfy every NodePool requirement,
   strictly (a required key the node lacks drifts; widening a list never does).
3. ``NodeClassDrift``: the EC2NodeClass static-field hash (``karpenter.k8s.aws/ec2nodeclass-hash``) differs.
4. ``AMIDrift``: the AMI the node runs is not the one the EC2NodeClass resolves now for its instance type
   (karpenter-provider-aws ``pkg/cloudprovider/drift.go`` ``isAMIDrifted``: the first resolved AMI whose
   requirements the type meets, the same ``ami_for`` launch picks with; a new release behind ``al2023@latest``, a
   newer image matching the same tags; a pinned ``al2023@v20250101`` resolves to the same AMI and does not drift).
5. ``SecurityGroupDrift``: its security groups differ from the resolved set.  6. ``SubnetDrift``: its subnet is no
   longer selected.  7. ``CapacityReservationDrift``: its capacity reservation is no longer selected.
8. ``PlacementGroupDrift``: its ``karpenter.k8s.aws/placement-group-id`` label is not the id of the placement group
   the EC2NodeClass resolves now (``isPlacementGroupDrifted``: a selector added, removed or naming another group,
   the group deleted); no evidence when the group could not be described.
9. ``InstanceTypeNotFound``: its instance type left the catalog, or has no offering in its zone and capacity type.

The cloud-side checks (3-8) run only when the EC2NodeClass resolved in this snapshot (an unresolved one says
nothing about drift).  :class:`Drift` is the method for dynamic NodePools (a static NodePool's drifted NodeClaims are
:class:`~.static_drift.StaticDrift`'s, as Karpenter's ``Drift.ShouldDisrupt`` leaves them out): eventual class, replacement first, empty nodes first, then the
non-empty nodes earliest drift first, as many as the NodePool's budget allows (in-flight ones count against it: as
Karpenter, whose drift command per pass is followed at once by the next, the budget sets the pace); a node whose pods
cannot all be rescheduled is skipped for the next one.  A node's pods are never counted on room that is already spoken for (:mod:`.replace`): not on an
empty drifted node removed in the same sweep, not on a replacement launched for another node's pods, not on room
the pods of an earlier command (in flight, or planned earlier in this sweep) will take.
"""

from __future__ import annotations

import json

from ..api import hashes
from ..api import labels as wk
from ..api.snapshot import ClusterSnapshot
from ..catalog.reservations import REASON_RESERVATION_DRIFT, reservation_drift
from ..scheduling.requirements import Requirements
from .candidates import condition_time, graceful_blockers
from .replace import leaving_of, removal_plan
from .static import is_static
from .types import BLOCK_PODS_WOULD_NOT_FIT, DRIFTED, GRACEFUL, Blocked, Candidate, Command, MethodBase

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
NODECLASS_DRIFT = "NodeClassDrift"
AMI_DRIFT = "AMIDrift"
SUBNET_DRIFT = "SubnetDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"
CAPACITY_RESERVATION_DRIFT = REASON_RESERVATION_DRIFT
PLACEMENT_GROUP_DRIFT = "PlacementGroupDrift"
DRIFT_KINDS = (NODEPOOL_DRIFTED, REQUIREMENTS_DRIFTED, NODECLASS_DRIFT, AMI_DRIFT, SECURITY_GROUP_DRIFT, SUBNET_DRIFT,
               CAPACITY_RESERVATION_DRIFT, PLACEMENT_GROUP_DRIFT, INSTANCE_TYPE_NOT_FOUND)


def _static_drift(nc, nodepool, nodeclass) -> tuple[str, str] | None:
    ann = nc.annotations or {}
    have = ann.get(wk.NODEPOOL_HASH)
    if have and ann.get(wk.NODEPOOL_HASH_VERSION) == hashes.NODEPOOL_HASH_VERSION:
        want = hashes.nodepool_hash(nodepool)
        if have != want:
            return NODEPOOL_DRIFTED, f"NodePool {nodepool.name} template changed (hash {have} -> {want})"
    return None


def _requirements_drift(nc, node: dict | None, nodepool) -> tuple[str, str] | None:
    labels = {**(nc.labels or {}), **(((node or {}).get("metadata") or {}).get("labels") or {})}
    try:
        want = Requirements.from_list(nodepool.requirements)
    except ValueError:
        return None  # an invalid NodePool is reported by validation, not acted on
    problem = Requirements.from_labels(labels).compatible(want, well_known=frozenset())
    if problem:
        return REQUIREMENTS_DRIFTED, f"labels no longer satisfy NodePool {nodepool.name} requirements: {problem}"
    return None


def _ami_drift(nc, nodeclass, resolved, instance_type_labels: dict | None) -> tuple[str, str] | None:
    """The image the node runs is not the AMI the EC2NodeClass resolves now for its instance type (upstream
    ``isAMIDrifted``): ``resolved.ami_for`` -- the one launch picks with -- on the type's labels.  No evidence
    without an image, resolved AMIs or the type's labels."""
    image = nc.status.get("imageID")
    amis = getattr(resolved, "amis", None) or []
    ami_for = getattr(resolved, "ami_for", None)
    if not image or not amis or ami_for is None or instance_type_labels is None:
        return None
    want = ami_for(instance_type_labels)
    if want is None:
        return AMI_DRIFT, (f"AMI {image}: no AMI EC2NodeClass {nodeclass.name} resolves serves instance type "
                           f"{nc.labels.get(wk.INSTANCE_TYPE, '?')} any more")
    if want.id != image:
        return AMI_DRIFT, (f"AMI {image} is no longer the one EC2NodeClass {nodeclass.name} selects for instance type "
                           f"{nc.labels.get(wk.INSTANCE_TYPE, '?')} ({want.id})")
    return None


def _placement_group_drift(nc, nodeclass, resolved) -> tuple[str, str] | None:
    """The NodeClaim's placement-group-id label (none: "") is not the id of the group the EC2NodeClass resolves now
    (none selected or not found: ""), as upstream ``isPlacementGroupDrifted``.  No evidence when the group could not
    be described (``PlacementGroupReady`` False with ``PlacementGroupResolutionFailed``)."""
    if resolved is None or nodeclass is None:
        return None
    if any(getattr(c, "type", None) == "PlacementGroupReady" and not getattr(c, "status", True)
           and getattr(c, "reason", "") == "PlacementGroupResolutionFailed"
           for c in getattr(resolved, "conditions", None) or []):
        return None
    have = (nc.labels or {}).get(wk.PLACEMENT_GROUP_ID) or ""
    group = getattr(resolved, "placement_group", None)
    want = (getattr(group, "id", "") or "") if group is not None else ""
    if have == want:
        return None
    if not want:
        return PLACEMENT_GROUP_DRIFT, f"placement group {have} is no longer selected by EC2NodeClass {nodeclass.name}"
    return PLACEMENT_GROUP_DRIFT, (f"EC2NodeClass {nodeclass.name} selects placement group {want}, the node is "
                                   f"{'in ' + have if have else 'in none'}")


def _nodeclass_drift(nc, nodeclass, resolved, instance_type_labels: dict | None = None) -> tuple[str, str] | None:
    ann = nc.annotations or {}
    if nodeclass is not None:
        have = ann.get(wk.NODECLASS_HASH)
        if have and ann.get(wk.NODECLASS_HASH_VERSION) == hashes.EC2NODECLASS_HASH_VERSION:
            want = hashes.ec2nodeclass_hash(nodeclass)
            if have != want:
                return NODECLASS_DRIFT, f"EC2NodeClass {nodeclass.name} changed (hash {have} -> {want})"
    if resolved is None:
        return None
    found = _ami_drift(nc, nodeclass, resolved, instance_type_labels)
    if found:
        return found
    groups = ann.get(wk.SECURITY_GROUPS_ANNOTATION)
    if groups:
        try:
            have_sg = sorted(json.loads(groups))
        except ValueError:
            have_sg = None
        want_sg = sorted(getattr(resolved, "security_group_ids", []) or [])
        if have_sg is not None and want_sg and have_sg != want_sg:
            return SECURITY_GROUP_DRIFT, f"security groups {have_sg} differ from EC2NodeClass {nodeclass.name}'s {want_sg}"
    subnet = ann.get(wk.SUBNET_ANNOTATION)
    subnets = {s.get("id") for s in getattr(resolved, "subnets", []) or []}
    if subnet and subnets and subnet not in subnets:
        return SUBNET_DRIFT, f"subnet {subnet} is no longer selected by EC2NodeClass {nodeclass.name}"
    return None


def _reservation_drift(nc, nodeclass, resolved) -> tuple[str, str] | None:
    """A NodeClaim in a capacity reservation the EC2NodeClass no longer resolves (deselected, expired, cancelled).
    No evidence (no drift) when the reservations could not be described (``CapacityReservationsReady`` False)."""
    if resolved is None or nodeclass is None:
        return None
    if any(getattr(c, "type", None) == "CapacityReservationsReady" and not getattr(c, "status", True)
           for c in getattr(resolved, "conditions", None) or []):
        return None
    if reservation_drift(nc.labels or {}, getattr(resolved, "capacity_reservations", None) or []) is None:
        return None
    rid = (nc.labels or {}).get(wk.CAPACITY_RESERVATION_ID, "?")
    return CAPACITY_RESERVATION_DRIFT, f"capacity reservation {rid} is no longer selected by EC2NodeClass {nodeclass.name}"


def _catalog_type(snap: ClusterSnapshot, nodepool, name: str | None):
    """(whether the NodePool's catalog was loaded, its instance type ``name`` or None), by name through an index kept
    on the snapshot (drift asks it twice per NodeClaim, for every NodeClaim)."""
    types = snap.instance_types.get(nodepool.name)
    if types is None:
        return False, None
    index = snap.__dict__.setdefault("_drift_types_by_name", {})
    by_name = index.get(nodepool.name)
    if by_name is None or by_name[0] is not types:
        by_name = index[nodepool.name] = (types, {t.name: t for t in reversed(types)})   # the first of a name wins
    return True, by_name[1].get(name)


def _instance_type_drift(nc, snap: ClusterSnapshot, nodepool) -> tuple[str, str] | None:
    name, zone, ct = nc.labels.get(wk.INSTANCE_TYPE), nc.labels.get(wk.ZONE), nc.labels.get(wk.CAPACITY_TYPE)
    loaded, it = _catalog_type(snap, nodepool, name)
    if not loaded:
        return None  # the catalog was not loaded for this NodePool: no evidence
    if not name:
        return None
    if it is None:
        return INSTANCE_TYPE_NOT_FOUND, f"instance type {name} is no longer offered to NodePool {nodepool.name}"
    if zone and ct and ct != wk.CAPACITY_TYPE_RESERVED and not any(o.zone == zone and o.capacity_type == ct for o in it.offerings):
        return INSTANCE_TYPE_NOT_FOUND, f"instance type {name} has no {ct} offering in {zone} any more"
    return None


def _instance_type_labels(nc, snap: ClusterSnapshot, nodepool) -> dict | None:
    """The labels of the NodeClaim's instance type the AMI is chosen on: the catalog's type (as upstream, which asks
    ``GetInstanceTypes``); the NodeClaim's own labels (the type's, stamped at launch) when the NodePool's catalog was
    not loaded; None when the type left the catalog (upstream errors out; ``InstanceTypeNotFound`` says it)."""
    loaded, it = _catalog_type(snap, nodepool, (nc.labels or {}).get(wk.INSTANCE_TYPE))
    if not loaded:
        return dict(nc.labels or {})
    return dict(it.labels) if it is not None else None


def drift_reason(nc, snap: ClusterSnapshot) -> tuple[str, str] | None:
    """(kind, message) when the NodeClaim drifted, else None.  Only launched NodeClaims drift (as Karpenter): one
    whose launch is not done yet has no instance type, zone or image to compare."""
    if not nc.is_true("Launched"):
        return None
    nodepool = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
    if nodepool is None:
        return None
    nodeclass = snap.nodeclasses.get((nc.spec.get("nodeClassRef") or nodepool.node_class_ref or {}).get("name", ""))
    node = snap.node_of_nodeclaim(nc.name)
    resolved = snap.resolved.get(nodeclass.name) if nodeclass is not None else None
    return (_static_drift(nc, nodepool, nodeclass) or _requirements_drift(nc, node, nodepool)
            or _nodeclass_drift(nc, nodeclass, resolved, _instance_type_labels(nc, snap, nodepool))
            or _reservation_drift(nc, nodeclass, resolved)
            or _placement_group_drift(nc, nodeclass, resolved)
            or _instance_type_drift(nc, snap, nodepool))


def mark_drifted(c: Candidate, snap: ClusterSnapshot) -> bool:
    """Has ``c`` drifted?  When it has, its kind and since when (the ``Drifted`` condition's time) go on it."""
    found = drift_reason(c.nodeclaim, snap)
    if found is None:
        return False
    c.drift_reason = found[0]
    c.drifted_since = condition_time(c.nodeclaim, "Drifted") or snap.now
    return True


class Drift(MethodBase):
    reason = DRIFTED
    kind = GRACEFUL
    eventual = True   # Karpenter's EventualDisruptionClass: a terminationGracePeriod lets it past pod blockers

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        # a static NodePool's (spec.replicas) drifted NodeClaims are StaticDrift's (Karpenter's Drift.ShouldDisrupt:
        # ``!c.OwnedByStaticNodePool()``): no NodePool is sized for their pods, their replacement is the template's
        return not is_static(c.nodepool) and mark_drifted(c, snap)

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        commands: list[Command] = []
        blocked: list[Blocked] = []
        ordered = sorted(candidates, key=lambda c: (bool(c.reschedulable), c.drifted_since or snap.now, c.name))
        budgets = ctx.budgets
        emptied: set[str] = set()                   # empty drifted nodes removed in this sweep: no capacity
        moving: set[str] = set()                    # earlier non-empty commands of this sweep: their pods go first
        for c in ordered:
            why = graceful_blockers(c, snap, eventual=True, ctx=ctx)
            if why:
                blocked.append(Blocked(c.name, why[0][0], why[0][1], DRIFTED))
                continue
            if not budgets.available(c.nodepool_name, DRIFTED):
                blocked.append(Blocked(c.name, "budget", budgets.message(c.nodepool_name, DRIFTED), DRIFTED))
                continue
            detail = f"{c.drift_reason}"
            if not c.reschedulable:
                budgets.take(c.nodepool_name, DRIFTED)
                emptied.add(c.name)
                commands.append(Command(DRIFTED, [c], detail=detail, savings_per_hour=round(c.price, 6)))
                continue
            result, exclude = removal_plan(snap, [c], ctx, exclude=emptied,
                                           leaving=leaving_of(snap, ctx) | moving)
            if not result.all_rescheduled:
                pod, why_not = next(iter(result.unschedulable.items()))
                blocked.append(Blocked(c.name, BLOCK_PODS_WOULD_NOT_FIT, f"pod {pod}: {why_not}", DRIFTED))
                continue
            budgets.take(c.nodepool_name, DRIFTED)
            moving.add(c.name)
            commands.append(Command(DRIFTED, [c], replacements=list(result.new_nodeclaims), detail=detail,
                                    savings_per_hour=round(c.price - result.price, 6)))
        return commands, blocked
