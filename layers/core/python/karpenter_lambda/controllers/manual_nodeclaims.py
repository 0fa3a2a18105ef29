"""Manual NodeClaims (Karpenter v1.15 concepts/nodeclaims: "You can also create NodeClaims manually to request
capacity outside of the standard provisioning workflow"; Karpenter's code calls them standalone): the pure part.

A NodeClaim stored by ``karpenter-lambda apply`` (or given to ``simulate``) is marked :data:`MANUAL_ANNOTATION` and
stored without a ``status`` (:func:`requested`, as the API server drops the status of a created object whose CRD has a
status subresource).  The lifecycle sweep launches it (:mod:`.manual_launch`); ``plan`` reports it and offers it to
the pending pods as in-flight capacity.  Both ask this module what it may launch as, as Karpenter's launch does
(karpenter-provider-aws ``pkg/providers/instance/instance.go`` ``filterInstanceTypes``): the EC2NodeClass's instance
types whose requirements are compatible with the NodeClaim's ``spec.requirements``, whose allocatable holds its
``spec.resources.requests`` and that have an available offering its requirements allow (``CompatibleAvailableFilter``),
without the exotic ones (GPUs, accelerators, metal) while a generic one is left and no requirement has minValues
(``ExoticInstanceTypeFilter``), cheapest first, truncated to :data:`MAX_INSTANCE_TYPES` keeping the minValues
(``InstanceTypes.Truncate``).  Nothing left, or minValues not met: Karpenter's ``InsufficientCapacityError`` ("all
requested instance types were unavailable during launch"), the reason given here.  NodeOverlays are not applied (the
launch catalog of the lifecycle sweep has none; upstream applies a labelled standalone NodeClaim's NodePool's).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..adapters.aws.fleet import MAX_INSTANCE_TYPES
from ..api import labels as wk
from ..api.objects import AWS_GROUP, NodeClaim, NodePool
from ..api.quantity import QuantityError, format_resource, parse_resource_list
from ..scheduling.model import NodeClaimPlan
from ..scheduling.nodeclaim import InstanceTypeOption, truncate
from ..scheduling.requirements import RequirementError, Requirements

#: on a NodeClaim ``apply`` (or ``simulate``) stored: ``"true"``.  The lifecycle sweep launches such a NodeClaim; the
#: provisioner's resolution of stuck launches leaves it alone (:func:`~.launcher.launch_pending`)
MANUAL_ANNOTATION = wk.PROJECT + "manual"
#: the launch order of capacity types (``cloudprovider/launch._pick_capacity_type``: upstream's)
CAPACITY_ORDER = (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)
REASON = "manual NodeClaim"


def is_manual(nc) -> bool:
    return (getattr(nc, "annotations", None) or {}).get(MANUAL_ANNOTATION) == "true"


def requested(obj: NodeClaim) -> NodeClaim:
    """The NodeClaim as ``apply`` / ``simulate`` store it when it is new: marked manual, without ``status`` (a status
    given in a file is not the world's: its instance, if any, is not this NodeClaim's)."""
    doc = copy.deepcopy(obj.doc)
    doc.pop("status", None)
    meta = doc.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), MANUAL_ANNOTATION: "true"}
    return NodeClaim(doc)


def nodeclass_ref_problem(nc) -> str | None:
    """Why the NodeClaim's ``nodeClassRef`` is not an EC2NodeClass (Karpenter's ``IsManaged``: another provider's
    NodeClaim is left alone), or None."""
    ref = nc.spec.get("nodeClassRef") or {}
    group = str(ref.get("group", "")).split("/", 1)[0]   # validation lets "karpenter.k8s.aws/v1" through
    if (group, ref.get("kind")) != (AWS_GROUP, "EC2NodeClass"):
        return (f"nodeClassRef {ref.get('group')}/{ref.get('kind')} {ref.get('name')!r} is not an EC2NodeClass "
                f"({AWS_GROUP}): karpenter-lambda launches EC2 instances only")
    return None


def nodeclass_name(nc) -> str:
    return str((nc.spec.get("nodeClassRef") or {}).get("name") or "")


@dataclass
class LaunchOptions:
    """What a manual NodeClaim may launch as: ``types`` cheapest first (at most :data:`MAX_INSTANCE_TYPES`), or
    ``why`` not (nothing left)."""

    types: list = field(default_factory=list)
    requirements: Requirements = field(default_factory=Requirements)
    requests: dict = field(default_factory=dict)
    why: str | None = None


def launch_options(nc, instance_types, max_types: int = MAX_INSTANCE_TYPES) -> LaunchOptions:
    """The instance types of ``instance_types`` (the EC2NodeClass's catalog, unavailable offerings marked) the
    NodeClaim ``nc`` may launch as (see the module doc).  Pure."""
    try:
        reqs = Requirements.from_list(nc.spec.get("requirements"))
    except RequirementError as e:
        return LaunchOptions(why=f"requirements cannot be evaluated: {e}")
    try:
        requests = parse_resource_list((nc.spec.get("resources") or {}).get("requests") or {})
    except QuantityError as e:
        return LaunchOptions(requirements=reqs, why=f"resources.requests cannot be read: {e}")
    compatible = held = 0
    priced: list[tuple[float, str, InstanceTypeOption]] = []
    for it in instance_types:
        opt = InstanceTypeOption(it, None, {})
        if opt.reqs.intersects(reqs) is not None:
            continue
        compatible += 1
        alloc = it.allocatable
        if it.unfit_reason() is not None or any(v > 0 and alloc.get(k, 0) < v for k, v in requests.items()):
            continue
        held += 1
        offering = opt.cheapest(reqs)
        if offering is not None:
            priced.append((float(offering.price), it.name, opt))
    priced.sort(key=lambda x: (x[0], x[1]))
    opts = [opt for _p, _n, opt in priced]
    if not opts:
        asked = ", ".join(f"{k}={format_resource(k, v)}" for k, v in sorted(requests.items())) or "nothing"
        return LaunchOptions(requirements=reqs, requests=requests, why=(
            f"all requested instance types were unavailable during launch: of {len(instance_types)} instance types "
            f"{compatible} meet the requirements, {held} of those hold the requests ({asked}), none of those has an "
            f"available offering the requirements allow" if held else
            f"all requested instance types were unavailable during launch: of {len(instance_types)} instance types "
            f"{compatible} meet the requirements and none of those holds the requests ({asked})"))
    min_values = [r for r in reqs if r.min_values]
    if not min_values:   # ExoticInstanceTypeFilter: generic types first, the exotic ones only when none is left
        generic = [o for o in opts if not o.exotic]
        opts = generic or opts
    unmet = []
    for r in min_values:
        values: set[str] = set()
        for o in opts:
            got = o.reqs.get(r.key).intersection(reqs.get(r.key))
            if not got.complement:
                values |= set(got.values)
        if len(values) < int(r.min_values):
            unmet.append(f"{r.key} ({len(values)} of {r.min_values})")
    if unmet:
        return LaunchOptions(requirements=reqs, requests=requests, why=(
            f"all requested instance types were unavailable during launch: minValues requirement is not met for "
            f"label(s) {', '.join(unmet)} by the {len(opts)} instance types that can launch"))
    kept = truncate(opts, reqs, max_types)
    return LaunchOptions(types=[o.it for o in kept], requirements=reqs, requests=requests)


def expected_offering(options: LaunchOptions):
    """``(instance type, offering)`` a launch of these options is expected to take: the capacity type in the launch's
    order (reserved, spot, on-demand) among the offerings the requirements allow, then the cheapest; or None."""
    reqs = options.requirements
    zone, ct = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    best: dict[str, tuple] = {}
    for it in options.types:
        for o in it.offerings:
            if not o.available or not zone.has(o.zone) or not ct.has(o.capacity_type):
                continue
            cur = best.get(o.capacity_type)
            if cur is None or (o.price, it.name, o.zone) < (cur[1].price, cur[0].name, cur[1].zone):
                best[o.capacity_type] = (it, o)
    return next((best[c] for c in CAPACITY_ORDER if c in best), None)


def nodepool_view(nc) -> NodePool:
    """The NodePool the launch path reads (its name, taints, startup taints): the NodeClaim's own -- its
    ``karpenter.sh/nodepool`` label (empty without one: the instance's ``karpenter.sh/nodepool`` tag is empty then, as
    upstream's ``GetTags``) and its spec's taints."""
    spec = nc.spec
    tspec = {"nodeClassRef": dict(spec.get("nodeClassRef") or {}), "requirements": list(spec.get("requirements") or [])}
    for f in ("taints", "startupTaints", "expireAfter", "terminationGracePeriod"):
        if spec.get(f):
            tspec[f] = copy.deepcopy(spec[f])
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": nc.nodepool_name},
                     "spec": {"template": {"spec": tspec}}})


def launch_plan(nc, options: LaunchOptions) -> NodeClaimPlan:
    """The plan the cloud provider's ``create`` launches for the manual NodeClaim (no pods: it requests capacity)."""
    return NodeClaimPlan(name=nc.name, nodepool=nc.nodepool_name, requirements=options.requirements,
                         instance_types=list(options.types), instance_type="", zone="", capacity_type="", price=0.0,
                         pods=[], requests=dict(options.requests), reason=REASON, labels=dict(nc.labels),
                         taints=list(nc.spec.get("taints") or []),
                         startup_taints=list(nc.spec.get("startupTaints") or []),
                         min_values_relaxed=nc.annotations.get(wk.NODECLAIM_MIN_VALUES_RELAXED) == "true")


def in_flight_doc(nc, it, offering) -> NodeClaim:
    """The NodeClaim as it would be once launched as ``it`` in ``offering`` (``plan``: the solver offers it to the
    pending pods as in-flight capacity): the instance type's labels, zone, capacity type, its allocatable."""
    doc = copy.deepcopy(nc.doc)
    meta = doc.setdefault("metadata", {})
    meta["labels"] = {**it.labels, **(meta.get("labels") or {}), wk.INSTANCE_TYPE: it.name, wk.ZONE: offering.zone,
                      wk.CAPACITY_TYPE: offering.capacity_type, **offering.reservation_labels()}
    meta["annotations"] = {**(meta.get("annotations") or {}), wk.PRICE_ANNOTATION: repr(round(float(offering.price), 6))}
    doc["status"] = {"capacity": {k: format_resource(k, v) for k, v in sorted(it.capacity.items())},
                     "allocatable": {k: format_resource(k, v) for k, v in sorted(it.allocatable.items()) if v >= 0}}
    return NodeClaim(doc)
