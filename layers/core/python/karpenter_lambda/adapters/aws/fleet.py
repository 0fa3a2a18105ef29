"""Launch one NodeClaim's instance with EC2 CreateFleet (type ``instant``).

Request (what Karpenter sends):

* ``TargetCapacitySpecification``: ``TotalTargetCapacity=1``, ``DefaultTargetCapacityType`` =
  the capacity type; ``SpotOptions.AllocationStrategy=price-capacity-optimized`` or
  ``OnDemandOptions.AllocationStrategy=lowest-price``, and for a NodeClaim annotated
  ``karpenter.sh/price-overlay-applied`` (:attr:`LaunchRequest.price_overlay`: a NodeOverlay set a price of one of its
  instance types) ``capacity-optimized-prioritized`` / ``prioritized``, so EC2 follows the overrides' ``Priority``
  (the overlaid prices' order) rather than its own prices (upstream ``types.go`` ``WithOverlay``, set by
  ``instance.go`` from that annotation);
* ``LaunchTemplateConfigs``: one per launch template, ``Version=$Latest``; overrides =
  (instance type x the zone's subnet with the most free IPs) for every candidate offering not in
  the unavailable-offerings cache, cheapest first: every zone of at most :data:`MAX_INSTANCE_TYPES` (60)
  instance types, as upstream (``pkg/providers/instance/instance.go``: ``filterInstanceTypes`` truncates the
  instance types to 60, ``getOverrides`` sends each kept type in every zone that has a subnet; no cap on the
  overrides themselves), ``Priority`` = rank by the candidates' price (0 = cheapest; the overlaid price when a
  NodeOverlay set one; upstream sends the price itself: the same order, equal prices there get equal priorities),
  ``ImageId`` when known;
* ``TagSpecifications`` for ``instance``, ``volume`` and ``fleet``: the EC2NodeClass tags, then
  ``kubernetes.io/cluster/<c>=owned``, ``karpenter.sh/nodepool``, ``karpenter.sh/nodeclaim``,
  ``karpenter.k8s.aws/ec2nodeclass``, ``eks:eks-cluster-name``, ``karpenter-lambda.io/cluster=<c>``
  (:data:`~karpenter_lambda.api.labels.OWNER_TAG`: what this deployment lists, garbage-collects and
  terminates by; upstream Karpenter sets the others too) (ours win) and ``Name`` = the NodeClaim name
  unless the EC2NodeClass sets one.  Beside upstream Karpenter (``beside_karpenter``, a migration) the
  ``eks:eks-cluster-name`` and ``karpenter.k8s.aws/ec2nodeclass`` keys are left off (:data:`UPSTREAM_LIST_KEYS`):
  Karpenter lists its instances by them, and would garbage-collect ours as NodeClaims it lost;
* ``ClientToken``: from the request's ``client_token`` (the launcher's token, unique per launch attempt and
  recorded on the NodeClaim before the call) and the whole request (templates, images, tags, overrides, capacity
  type): botocore's own retries of one call are idempotent at EC2, a retry after marking offerings unavailable or
  after a launch template changed is a new request (never ``IdempotentParameterMismatch``), and a new launch
  attempt never gets an old (maybe dead) instance back.  The simulator's EC2 honours it (``sim/moto_ec2.py``).

Errors: the ``Instances`` of the answer are read first: once an instance launched, nothing after it can
turn the launch into a failure.  Fleet errors with codes in :data:`ICE_CODES` (upstream's
``unfulfillableCapacityErrorCodes``, ``pkg/errors/errors.go``) mark (type, zone, capacity
type) unavailable for 3 minutes (a failing cache write is logged, never fatal); when no instance
launched, :class:`InsufficientCapacityError` lists them so the caller retries with what remains.
``AuthFailure.ServiceLinkedRoleCreationNotPermitted`` (:data:`SPOT_SLR_CODE`: the account has no spot service-linked
role and may not create it) in a spot or on-demand launch marks the whole spot capacity type unavailable
(``("any", "any", "spot")``, :func:`~karpenter_lambda.catalog.reservations.capacity_type_key`; upstream
``MarkCapacityTypeUnavailable``) and counts as insufficient capacity, so launches fall back to on-demand for the
cache's TTL; a later spot request meeting that entry is refused before CreateFleet the same way.
Throttling (:data:`THROTTLE_CODES`, e.g. ``RequestLimitExceeded``) raises :class:`LaunchThrottled` and marks
nothing: the offerings are fine, the request should be retried later.  Any other error EC2 answered (4xx)
raises :class:`FleetLaunchError` with EC2's messages.  A timeout, a connection error or a 5xx is re-raised as
it is: whether an instance launched is unknown.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Iterable

from ...api import labels as wk
from ...catalog.reservations import capacity_type_key, capacity_type_unavailable

#: at most this many instance TYPES per CreateFleet (upstream ``instance.go`` ``maxInstanceTypes``); each is sent in
#: every zone it is offered in, so a launch may carry up to 60 x zones overrides
MAX_INSTANCE_TYPES = 60
ICE_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
#: CreateFleet's answer when spot needs the service-linked role and the caller may not create it: upstream marks every
#: spot offering unavailable (``updateUnavailableOfferingsCache``) and counts it as insufficient capacity
SPOT_SLR_CODE = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
# EC2's throttling answers (as an exception once botocore's retries are spent, or in a fleet's Errors)
THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
        "SlowDown",
    }
)
CAPACITY_TYPES = ("spot", "on-demand", "reserved")
#: CreateFleet allocation strategies, without / with a price overlay (upstream ``types.go`` ``Build``): with one, EC2
#: launches by the overrides' Priority (our price order) instead of by its own prices
SPOT_STRATEGY = {False: "price-capacity-optimized", True: "capacity-optimized-prioritized"}
ON_DEMAND_STRATEGY = {False: "lowest-price", True: "prioritized"}
log = logging.getLogger(__name__)


class LaunchError(Exception):
    """Base of launch failures."""


class InsufficientCapacityError(LaunchError):
    """No instance launched: every tried offering lacked capacity. ``unavailable`` = [(type, zone, capacity type)]."""

    def __init__(self, message: str, unavailable: list[tuple[str, str, str]] | None = None, errors: list[dict] | None = None):
        super().__init__(message)
        self.unavailable = list(unavailable or [])
        self.errors = list(errors or [])


class FleetLaunchError(LaunchError):
    """CreateFleet failed for a reason other than capacity; ``errors`` = [{code, message, ...}]."""

    def __init__(self, message: str, errors: list[dict] | None = None):
        super().__init__(message)
        self.errors = list(errors or [])


class LaunchThrottled(FleetLaunchError):
    """EC2 throttled CreateFleet (:data:`THROTTLE_CODES`): nothing launched, no offering is to blame; retry later."""


@dataclass
class LaunchRequest:
    nodeclaim_name: str
    nodepool_name: str
    nodeclass_name: str
    capacity_type: str  # "spot" | "on-demand" | "reserved"
    candidates: list[tuple]  # [(instance type, zone or None, price)], cheapest first
    #: {instance type: LaunchTemplateRef | {"name", "image_id"?} | lt name}; a reserved launch keys them by
    #: (instance type, zone): one template per capacity reservation
    launch_templates: dict
    subnets: object  # {zone: subnet id} or [{id, zone, available_ips}] (best per zone is used)
    tags: dict = field(default_factory=dict)  # EC2NodeClass tags
    client_token: str | None = None
    #: a reserved launch: {(instance type, zone): capacity reservation id} and the reservations' type
    #: (``default`` | ``capacity-block``; one type per launch, as upstream)
    reservations: dict = field(default_factory=dict)
    reservation_type: str | None = None
    context: str | None = None  # the EC2NodeClass's ``context`` (CreateFleet Context)
    #: the NodeClaim carries ``karpenter.sh/price-overlay-applied``: CreateFleet launches by the overrides' Priority
    #: (on-demand ``prioritized``, spot ``capacity-optimized-prioritized``), i.e. by the overlaid prices
    price_overlay: bool = False

    def offering_keys(self, offerings) -> list[tuple[str, str, str]]:
        """Unavailable-offerings keys of ``(type, zone, capacity type)`` rows: a reserved row is its capacity
        reservation ``(reservation id, zone, "reserved")`` (what the catalog and the interruption handler read)."""
        out = []
        for it, zone, ct in offerings:
            rid = self.reservations.get((it, zone)) if ct == "reserved" else None
            out.append((rid, zone, ct) if rid else (it, zone, ct))
        return sorted(set(out))


@dataclass
class LaunchResult:
    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    capacity_type: str
    image_id: str | None
    price: float | None
    launch_template: str | None = None
    fleet_id: str | None = None
    errors: list[dict] = field(default_factory=list)  # partial errors for offerings not chosen
    reservation_id: str | None = None  # a reserved launch: the capacity reservation it went into


def _lt_fields(ref) -> tuple[str, str | None]:
    if isinstance(ref, str):
        return ref, None
    if isinstance(ref, dict):
        return ref["name"], ref.get("image_id") or ref.get("imageId")
    return ref.name, getattr(ref, "image_id", None)


def subnet_per_zone(subnets) -> dict[str, str]:
    """``{zone: subnet id}``: for a list of subnet dicts, the one with the most free IPs per zone."""
    if isinstance(subnets, dict):
        return {z: (s["id"] if isinstance(s, dict) else s) for z, s in subnets.items()}
    best: dict[str, dict] = {}
    for s in subnets or []:
        cur = best.get(s["zone"])
        if cur is None or int(s.get("available_ips", 0)) > int(cur.get("available_ips", 0)):
            best[s["zone"]] = s
    return {z: s["id"] for z, s in best.items()}


# Tag keys upstream Karpenter lists its instances by (with karpenter.sh/nodepool): left off when this deployment runs
# beside it (``beside_karpenter``), so its garbage collection never sees these instances as NodeClaims it lost.
UPSTREAM_LIST_KEYS = ("eks:eks-cluster-name", wk.EC2NODECLASS)


def fleet_tags(cluster_name: str, req: LaunchRequest, beside_karpenter: bool = False) -> dict[str, str]:
    tags = dict(req.tags or {})
    tags.setdefault("Name", req.nodeclaim_name)
    tags.update(
        {
            f"kubernetes.io/cluster/{cluster_name}": "owned",
            wk.NODEPOOL: req.nodepool_name,
            wk.NODECLAIM_TAG: req.nodeclaim_name,
            wk.EC2NODECLASS: req.nodeclass_name,
            "eks:eks-cluster-name": cluster_name,
            wk.OWNER_TAG: cluster_name,
        }
    )
    if beside_karpenter:
        for k in UPSTREAM_LIST_KEYS:
            tags.pop(k, None)
    return tags


def _code(e: Exception) -> tuple[str, str]:
    err = (getattr(e, "response", None) or {}).get("Error") or {}
    return err.get("Code", type(e).__name__), err.get("Message", str(e))


class FleetLauncher:
    def __init__(self, ec2, cluster_name: str, unavailable=None, beside_karpenter: bool = False):
        self.ec2 = ec2
        self.cluster_name = cluster_name
        self.unavailable = unavailable
        self.beside_karpenter = beside_karpenter

    # -- request --------------------------------------------------------------------
    def plan_overrides(self, req: LaunchRequest, unavailable: set | None = None) -> list[dict]:
        """``[{type, zone, subnet, price, lt, image_id}]`` in price order, filtered: every zone of the
        :data:`MAX_INSTANCE_TYPES` cheapest instance types (the caller, ``cloudprovider/launch.py``, has already
        truncated them as upstream does; this keeps a direct caller within the same bound)."""
        if req.capacity_type not in CAPACITY_TYPES:
            raise ValueError(f"capacity_type must be spot, on-demand or reserved, got {req.capacity_type!r}")
        zones = subnet_per_zone(req.subnets)
        skip = unavailable or set()
        rows, seen = [], set()
        for cand in req.candidates:
            it, zone, price = cand[0], cand[1], (cand[2] if len(cand) > 2 else None)
            for z in [zone] if zone else sorted(zones):
                ref = req.launch_templates.get((it, z)) or req.launch_templates.get(it)
                if ref is None:
                    continue
                lt, image_id = _lt_fields(ref)
                if z not in zones or (it, z) in seen or req.offering_keys([(it, z, req.capacity_type)])[0] in skip:
                    continue
                seen.add((it, z))
                rows.append({"type": it, "zone": z, "subnet": zones[z], "price": price, "lt": lt, "image_id": image_id})
        rows.sort(key=lambda r: (float("inf") if r["price"] is None else r["price"]))  # stable: input order breaks ties
        kept = set(list(dict.fromkeys(r["type"] for r in rows))[:MAX_INSTANCE_TYPES])
        return [r for r in rows if r["type"] in kept]

    @staticmethod
    def client_token(req: LaunchRequest, params: dict) -> str:
        """The launch attempt's token and the whole request but the token itself (launch templates, images, tags,
        overrides, capacity type): EC2 answers ``IdempotentParameterMismatch`` to a token reused with other
        parameters, so anything that changes the request changes the token."""
        base = req.client_token or req.nodeclaim_name
        body = json.dumps({k: v for k, v in params.items() if k != "ClientToken"}, sort_keys=True, default=str)
        return "kl-" + hashlib.sha256((base + "|" + body).encode()).hexdigest()[:40]

    def build_request(self, req: LaunchRequest, rows: list[dict]) -> dict:
        configs: dict[str, list[dict]] = {}
        for rank, r in enumerate(rows):
            o = {"InstanceType": r["type"], "SubnetId": r["subnet"], "Priority": float(rank)}
            if r["image_id"]:
                o["ImageId"] = r["image_id"]
            configs.setdefault(r["lt"], []).append(o)
        tags = [{"Key": k, "Value": v} for k, v in sorted(fleet_tags(self.cluster_name, req, self.beside_karpenter).items())]
        default_type = req.capacity_type
        if req.capacity_type == "reserved":  # EC2 has no "reserved" target: the template's reservation decides
            default_type = "capacity-block" if req.reservation_type == "capacity-block" else "on-demand"
        params = {
            "Type": "instant",
            "LaunchTemplateConfigs": [
                {"LaunchTemplateSpecification": {"LaunchTemplateName": lt, "Version": "$Latest"}, "Overrides": ovs}
                for lt, ovs in configs.items()
            ],
            "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": default_type},
            "TagSpecifications": [{"ResourceType": rt, "Tags": tags} for rt in ("instance", "volume", "fleet")],
        }
        if req.capacity_type == "spot":
            params["SpotOptions"] = {"AllocationStrategy": SPOT_STRATEGY[bool(req.price_overlay)]}
        elif default_type != "capacity-block":
            params["OnDemandOptions"] = {"AllocationStrategy": ON_DEMAND_STRATEGY[bool(req.price_overlay)]}
        if req.context:
            params["Context"] = req.context
        params["ClientToken"] = self.client_token(req, params)
        return params

    # -- launch ---------------------------------------------------------------------
    def _mark(self, offerings: list[tuple[str, str, str]], reason: str) -> None:
        """Best effort: a failing cache write is logged (the next launch may try those offerings again), never
        raised -- it must not turn a launched instance, or EC2's real answer, into another error."""
        if self.unavailable is None or not offerings:
            return
        try:
            self.unavailable.mark_many(offerings, reason)
        except Exception as e:  # noqa: BLE001
            log.warning("could not mark %d offerings unavailable (%s): %s", len(offerings), reason, e,
                        extra={"decision": "unavailable-cache-error", "offerings": [list(o) for o in offerings]})

    def launch(self, req: LaunchRequest) -> LaunchResult:
        skip: set = set()
        if self.unavailable is not None:
            try:
                skip = self.unavailable.all()
            except Exception as e:  # noqa: BLE001 - an unreadable cache costs at most a capacity error
                log.warning("unavailable-offerings cache unreadable, launching without it: %s", e)
        if capacity_type_unavailable(req.capacity_type, skip):
            raise InsufficientCapacityError(
                f"NodeClaim {req.nodeclaim_name}: {req.capacity_type} is unavailable (a launch found no spot "
                f"service-linked role): not sent to CreateFleet", [capacity_type_key(req.capacity_type)])
        rows = self.plan_overrides(req, skip)
        if not rows:
            raise InsufficientCapacityError(
                f"NodeClaim {req.nodeclaim_name}: no launchable {req.capacity_type} offering left "
                f"(all candidates unavailable, without a launch template, or in zones without a subnet)",
                [],
            )
        params = self.build_request(req, rows)
        by_subnet = {r["subnet"]: r["zone"] for r in rows}
        price_of = {(r["type"], r["zone"]): r["price"] for r in rows}
        lt_of = {r["type"]: r["lt"] for r in rows}
        try:
            resp = self.ec2.create_fleet(**params)
        except Exception as e:  # noqa: BLE001
            code, msg = _code(e)
            if code in THROTTLE_CODES:
                raise LaunchThrottled(f"CreateFleet throttled: {code}: {msg}", [{"code": code, "message": msg}]) from e
            if code in ICE_CODES:
                offs = req.offering_keys({(r["type"], r["zone"], req.capacity_type) for r in rows})
                self._mark(offs, f"{code}: {msg}")
                raise InsufficientCapacityError(f"{code}: {msg}", offs, [{"code": code, "message": msg}]) from e
            status = ((getattr(e, "response", None) or {}).get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0
            if not isinstance(getattr(e, "response", None), dict) or status >= 500:
                raise  # a timeout, a connection error, EC2's 5xx: it may have launched (the caller must not roll back)
            raise FleetLaunchError(f"CreateFleet failed: {code}: {msg}", [{"code": code, "message": msg}]) from e

        errors, ice = [], []
        for err in resp.get("Errors") or []:
            ov = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            it = ov.get("InstanceType")
            zone = ov.get("AvailabilityZone") or by_subnet.get(ov.get("SubnetId", ""))
            ct = err.get("Lifecycle") or req.capacity_type
            ct = req.capacity_type if req.capacity_type == "reserved" else (
                "on-demand" if ct == "on-demand" else ("spot" if ct == "spot" else req.capacity_type))
            entry = {"code": err.get("ErrorCode", ""), "message": err.get("ErrorMessage", ""), "instanceType": it, "zone": zone}
            errors.append(entry)
            if entry["code"] in ICE_CODES and it and zone:
                ice.append((it, zone, ct))
        ice = req.offering_keys(ice)
        if req.capacity_type != "reserved" and any(e["code"] == SPOT_SLR_CODE for e in errors):
            ice.append(capacity_type_key("spot"))   # upstream: every spot offering, for the cache's TTL
        capacity_codes = ICE_CODES | {SPOT_SLR_CODE}
        ice_reason = "; ".join(sorted({f"{e['code']}: {e['message']}" for e in errors if e["code"] in capacity_codes}))

        # The instance first: once EC2 launched one, nothing below may turn this into a failure (a caller
        # would roll the NodeClaim back and the instance would run without one).
        result = None
        for inst in resp.get("Instances") or []:
            ids = inst.get("InstanceIds") or []
            if not ids:
                continue
            ov = (inst.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            it = inst.get("InstanceType") or ov.get("InstanceType")
            subnet = ov.get("SubnetId")
            zone = ov.get("AvailabilityZone") or by_subnet.get(subnet or "")
            image_id = ov.get("ImageId")
            if not subnet or not zone or not image_id:
                try:
                    d = self.ec2.describe_instances(InstanceIds=[ids[0]])["Reservations"][0]["Instances"][0]
                    subnet = subnet or d.get("SubnetId")
                    zone = zone or d.get("Placement", {}).get("AvailabilityZone")
                    image_id = image_id or d.get("ImageId")
                except Exception as e:  # noqa: BLE001 - eventual consistency: describe may not see it yet
                    log.warning("launched %s but could not describe it: %s", ids[0], e)
            lifecycle = inst.get("Lifecycle") or req.capacity_type
            if req.capacity_type == "reserved":
                lifecycle = "reserved"
            result = LaunchResult(
                instance_id=ids[0],
                instance_type=it,
                zone=zone,
                subnet_id=subnet,
                capacity_type=lifecycle if lifecycle in ("spot", "reserved") else "on-demand",
                image_id=image_id,
                price=price_of.get((it, zone)),
                launch_template=lt_of.get(it),
                fleet_id=resp.get("FleetId"),
                errors=errors,
                reservation_id=req.reservations.get((it, zone)),
            )
            break
        if ice:
            self._mark(ice, ice_reason)
        if result is not None:
            return result

        # each distinct error once (EC2 repeats one per override: 180 overrides out of spot capacity, one message)
        summary = "; ".join(dict.fromkeys(f"{e['code']}: {e['message']}" for e in errors)) or \
            "CreateFleet returned no instance and no error"
        if errors and all(e["code"] in capacity_codes for e in errors):
            raise InsufficientCapacityError(f"NodeClaim {req.nodeclaim_name}: {summary}", ice, errors)
        if any(e["code"] in THROTTLE_CODES for e in errors):
            raise LaunchThrottled(f"NodeClaim {req.nodeclaim_name}: CreateFleet throttled: {summary}", errors)
        raise FleetLaunchError(f"NodeClaim {req.nodeclaim_name}: CreateFleet launched nothing: {summary}", errors)


def candidates_from_instance_types(instance_types: Iterable, capacity_type: str, zones: Iterable[str] | None = None, unavailable: set | None = None) -> list[tuple[str, str, float]]:
    """``[(type, zone, price)]`` cheapest first from catalog ``InstanceType`` offerings of one capacity type."""
    zs = set(zones) if zones is not None else None
    skip = unavailable or set()
    out = []
    for it in instance_types:
        for o in it.offerings:
            if not o.available or o.capacity_type != capacity_type:
                continue
            if zs is not None and o.zone not in zs:
                continue
            if (it.name, o.zone, capacity_type) in skip:
                continue
            out.append((it.name, o.zone, float(o.price)))
    out.sort(key=lambda c: (c[2], c[0], c[1]))
    return out
