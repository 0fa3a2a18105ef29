"""EC2 launch of one NodeClaim: launch templates per (AMI, max pods), CreateFleet, insufficient-capacity fallback.

The instance provider's ``create`` (:mod:`.instance`, behind :class:`~.aws.AWSCloudProvider`); the launcher
(:mod:`karpenter_lambda.controllers.launcher`) calls it after the NodeClaim is committed and written.  Candidates are the
plan's instance types x available offerings in the EC2NodeClass's subnet zones, filtered by the plan's
zone and capacity-type requirements.  Spot is used when the plan allows it and spot offerings exist
(Karpenter's behaviour), else on-demand.  Each insufficient-capacity answer marks the offerings
unavailable (3 min, by the fleet launcher) and the next attempt uses what remains; when nothing
remains the reason is returned so the pods are reported unschedulable.

What the caller may roll back: :class:`NoCapacity` and :class:`LaunchFailed` mean nothing was launched
(``LaunchFailed.throttled``: EC2 throttled the call, retry later).  Any other exception leaves it open.
"""

from __future__ import annotations

import logging

from ..adapters.aws.fleet import (
    THROTTLE_CODES,
    FleetLauncher,
    FleetLaunchError,
    InsufficientCapacityError,
    LaunchRequest,
    LaunchThrottled,
)
from ..adapters.aws.launch_templates import LaunchTemplates
from ..adapters.aws.userdata import ClusterInfo
from ..api import labels as wk
from .types import CreateRequest, Instance, LaunchFailed, NoCapacity

log = logging.getLogger(__name__)


def _allowed(requirements, key: str, value: str) -> bool:
    """Whether the plan's requirements admit ``value`` for ``key``.  Fails closed: requirements that cannot be
    evaluated admit nothing (an offering outside the plan must never be launched)."""
    try:
        if key not in requirements:
            return True
        return bool(requirements.get(key).has(value))
    except Exception as e:  # noqa: BLE001
        log.warning("requirement %s cannot be evaluated for %r (%s): offering excluded", key, value, e)
        return False


def candidates_for(plan, resolved, exclude: set) -> dict[str, list[tuple[str, str, float]]]:
    """capacity type -> [(instance type, zone, price)] cheapest first."""
    zones = set(resolved.subnets_by_zone()) if hasattr(resolved, "subnets_by_zone") else None
    out: dict[str, list[tuple[str, str, float]]] = {}
    for it in plan.instance_types:
        for o in it.offerings:
            if not o.available or (it.name, o.zone, o.capacity_type) in exclude:
                continue
            if zones is not None and o.zone not in zones:
                continue
            if not _allowed(plan.requirements, wk.ZONE, o.zone) or not _allowed(plan.requirements, wk.CAPACITY_TYPE, o.capacity_type):
                continue
            if o.capacity_type == wk.CAPACITY_TYPE_RESERVED:
                continue  # capacity reservations are not launched by this path
            out.setdefault(o.capacity_type, []).append((it.name, o.zone, float(o.price)))
    for ct in out:
        out[ct].sort(key=lambda c: (c[2], c[0], c[1]))
    return out


def _pick_capacity_type(cands: dict) -> str | None:
    if cands.get(wk.CAPACITY_TYPE_SPOT):
        return wk.CAPACITY_TYPE_SPOT
    if cands.get(wk.CAPACITY_TYPE_ON_DEMAND):
        return wk.CAPACITY_TYPE_ON_DEMAND
    return None


def launch(provider, request: CreateRequest, on_retry=None) -> Instance:
    """CreateFleet with ICE fallback; raises :class:`NoCapacity` with the reason when nothing could be launched.
    ``provider`` gives ``ec2``, ``cluster`` (name, endpoint, CA, service CIDR), ``unavailable`` and
    ``beside_karpenter`` (:class:`~.instance.InstanceProvider`)."""
    try:  # everything before CreateFleet: a failure here launched nothing
        cluster = provider.cluster
        plan, np, nodeclass, resolved, name = request.plan, request.nodepool, request.nodeclass, request.resolved, request.name
        info = ClusterInfo(name=cluster.name, endpoint=cluster.endpoint, ca_b64=cluster.ca_b64,
                           cidr=getattr(cluster, "service_cidr", None))
        labels = dict(request.labels)
        taints = list(np.taints)
        startup = list(np.startup_taints)
        lts = LaunchTemplates(provider.ec2, cluster.name)
        fleet = FleetLauncher(provider.ec2, cluster.name, provider.unavailable,
                              beside_karpenter=bool(getattr(provider, "beside_karpenter", False)))
        types_by_name = {it.name: it for it in plan.instance_types}
    except Exception as e:
        raise LaunchFailed(f"launch of NodeClaim {request.name} not prepared: {e}") from e
    exclude: set = set()
    last_error = ""
    attempt = 0
    for attempt in range(6):
        try:
            cands = candidates_for(plan, resolved, exclude)
            ct = _pick_capacity_type(cands)
            if ct is None:
                why = f"no offering left for NodePool {np.name}"
                if last_error:
                    why += f" after insufficient capacity ({last_error})"
                raise NoCapacity(why)
            chosen = cands[ct][:60]
            its = [types_by_name[n] for n in dict.fromkeys(c[0] for c in chosen)]
            try:
                lt_map = lts.ensure_for(resolved, info, its, labels, taints, startup, ct)
            except Exception as e:
                raise LaunchFailed(f"launch templates for EC2NodeClass {nodeclass.name}: {e}", throttled=_throttled(e)) from e
            chosen = [c for c in chosen if c[0] in lt_map]
            if not chosen:
                raise NoCapacity(f"EC2NodeClass {nodeclass.name}: no AMI matches the instance types of NodePool {np.name}")
            subnets = resolved.subnets_by_zone()
            req = LaunchRequest(
                nodeclaim_name=name, nodepool_name=np.name, nodeclass_name=nodeclass.name, capacity_type=ct,
                candidates=chosen, launch_templates=dict(lt_map),
                subnets={z: s["id"] for z, s in subnets.items()}, tags=dict(nodeclass.tags),
                client_token=f"{request.client_token or name}-{attempt}"[:64],
            )
        except (NoCapacity, LaunchFailed):
            raise
        except Exception as e:  # before CreateFleet: nothing launched
            raise LaunchFailed(f"launch of NodeClaim {name} not prepared: {e}") from e
        try:
            result = fleet.launch(req)
        except LaunchThrottled as e:
            raise LaunchFailed(str(e), throttled=True) from e
        except InsufficientCapacityError as e:
            for off in getattr(e, "unavailable", []) or []:
                exclude.add(tuple(off))
            if not getattr(e, "unavailable", None):  # nothing to exclude: don't loop forever
                exclude.update((c[0], c[1], ct) for c in chosen)
            last_error = str(e)
            if on_retry is not None:
                on_retry(str(e), [list(x) for x in getattr(e, "unavailable", [])])
            continue
        except FleetLaunchError as e:  # EC2 answered: nothing launched
            raise LaunchFailed(str(e)) from e
        except ValueError as e:  # the request was refused before the call (FleetLauncher's own checks)
            raise LaunchFailed(str(e)) from e
        # launched: from here on nothing may fail the launch
        it = types_by_name.get(result.instance_type)
        image_id = getattr(result, "image_id", None) or (lt_map[result.instance_type].image_id if result.instance_type in lt_map else None)
        price = getattr(result, "price", None)
        if price is None and it is not None:
            try:
                o = it.cheapest_offering(zones={result.zone}, capacity_types={result.capacity_type})
                price = o.price if o else 0.0
            except Exception:  # noqa: BLE001
                price = 0.0
        return Instance(instance_id=result.instance_id, instance_type=result.instance_type, zone=result.zone,
                        capacity_type=result.capacity_type, price=float(price or 0.0), image_id=image_id,
                        subnet_id=getattr(result, "subnet_id", None),
                        security_group_ids=sorted(getattr(resolved, "security_group_ids", None) or []))
    raise NoCapacity(f"no capacity after {attempt + 1} attempts ({last_error})")


def _throttled(e: BaseException) -> bool:
    code = ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")
    return code in THROTTLE_CODES
