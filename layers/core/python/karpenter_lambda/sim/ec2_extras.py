"""What moto's EC2 lacks for capacity reservations and placement groups, added to it for the simulator and the tests.

moto 5.2 answers neither CreateCapacityReservation / DescribeCapacityReservations nor CreatePlacementGroup /
DescribePlacementGroups, and its CreateFleet ignores a launch template's ``CapacityReservationSpecification`` and
``Placement``.  :func:`install` adds, on moto's EC2 response class and backend (once per process):

* ``CreateCapacityReservation`` (``InstanceType``, ``InstancePlatform``, ``AvailabilityZone``, ``InstanceCount``,
  ``EndDate``, ``InstanceMatchCriteria``, ``TagSpecifications``; ``ReservationType`` may be given as
  ``capacity-block`` to model a capacity block) and ``CancelCapacityReservation``;
* ``DescribeCapacityReservations`` by ids (an unknown id: ``InvalidCapacityReservationId.NotFound``) and the filters
  ``state``, ``owner-id``, ``instance-type``, ``availability-zone``, ``instance-match-criteria``, ``tag:<k>``,
  ``tag-key``; an ended reservation reads ``expired``;
* ``CreatePlacementGroup`` / ``DescribePlacementGroups`` (by ``GroupNames``, ``GroupIds``, ``state``) /
  ``DeletePlacementGroup``;
* CreateFleet through a launch template targeting a reservation (``CapacityReservationTarget``): overrides of another
  type or zone are dropped; a reservation with no room left answers ``ReservationCapacityExceeded`` (raised, as a
  call error: the fleet launcher handles both forms); a launched instance carries ``CapacityReservationId`` and
  ``CapacityReservationSpecification`` and takes one from ``AvailableInstanceCount``, given back when it is
  terminated.  A template's ``Placement.GroupId`` / ``PartitionNumber`` end up on the instance's ``Placement``.

``install()`` is idempotent and returns False only for a moto other than 5.2.x (nothing is changed then).  moto's
per-class method-name cache (``sim/moto_speedups.py``) is refreshed so the new actions are found either way.
"""

from __future__ import annotations

import itertools
import threading
from datetime import datetime, timezone
from typing import Any

_lock = threading.Lock()
_ids = itertools.count(1)
_installed = False


def _new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids):017x}"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _tags_from_spec(specs: list[dict] | None, resource: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in specs or []:
        if s.get("ResourceType") in (resource, None):
            for t in s.get("Tags") or s.get("Tag") or []:
                out[str(t.get("Key"))] = str(t.get("Value", ""))
    return out


def _state(r: dict) -> str:
    end = r.get("_end")
    if r["State"] == "active" and end is not None and end <= _now():
        return "expired"
    return r["State"]


def _view(r: dict) -> dict:
    out = {k: v for k, v in r.items() if not k.startswith("_")}
    out["State"] = _state(r)
    out["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(r["_tags"].items())]
    return out


def _matches(r: dict, filters: dict[str, list[str]]) -> bool:
    for name, values in filters.items():
        values = [str(v) for v in values]
        if name == "state":
            ok = _state(r) in values
        elif name == "owner-id":
            ok = r["OwnerId"] in values
        elif name == "instance-type":
            ok = r["InstanceType"] in values
        elif name == "availability-zone":
            ok = r["AvailabilityZone"] in values
        elif name == "instance-match-criteria":
            ok = r["InstanceMatchCriteria"] in values
        elif name == "tag-key":
            ok = any(k in r["_tags"] for k in values)
        elif name.startswith("tag:"):
            ok = r["_tags"].get(name[4:]) in values
        else:
            ok = True  # a filter the simulator does not model selects everything
        if not ok:
            return False
    return True


def reservations_of(backend: Any) -> dict[str, dict]:
    with _lock:
        if not hasattr(backend, "karpenter_lambda_reservations"):
            backend.karpenter_lambda_reservations = {}
            backend.karpenter_lambda_placement_groups = {}
        return backend.karpenter_lambda_reservations


def placement_groups_of(backend: Any) -> dict[str, dict]:
    reservations_of(backend)
    return backend.karpenter_lambda_placement_groups


# -- the responses --------------------------------------------------------------------------------------------
def create_capacity_reservation(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    count = int(self._get_param("InstanceCount") or 0)
    if count <= 0 or not self._get_param("InstanceType") or not self._get_param("AvailabilityZone"):
        raise EC2ClientError("InvalidParameterValue", "InstanceType, AvailabilityZone and InstanceCount > 0 are required")
    end = self._get_param("EndDate")
    end_dt = datetime.fromisoformat(str(end).replace("Z", "+00:00")) if isinstance(end, str) and end else end
    if isinstance(end_dt, datetime) and end_dt.tzinfo is None:
        end_dt = end_dt.replace(tzinfo=timezone.utc)
    rid = _new_id("cr")
    owner = self.current_account
    r = {
        "CapacityReservationId": rid,
        "OwnerId": owner,
        "CapacityReservationArn": f"arn:aws:ec2:{self.region}:{owner}:capacity-reservation/{rid}",
        "InstanceType": self._get_param("InstanceType"),
        "InstancePlatform": self._get_param("InstancePlatform") or "Linux/UNIX",
        "AvailabilityZone": self._get_param("AvailabilityZone"),
        "Tenancy": self._get_param("Tenancy") or "default",
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count,
        "EbsOptimized": False,
        "EphemeralStorage": False,
        "State": "active",
        "StartDate": _now(),
        "EndDateType": "limited" if end_dt else "unlimited",
        "InstanceMatchCriteria": self._get_param("InstanceMatchCriteria") or "open",
        "CreateDate": _now(),
        "ReservationType": self._get_param("ReservationType") or "default",
        "_tags": _tags_from_spec(self._get_param("TagSpecifications", []), "capacity-reservation"),
        "_end": end_dt,
    }
    if end_dt:
        r["EndDate"] = end_dt
    reservations_of(self.ec2_backend)[rid] = r
    return ActionResult({"CapacityReservation": _view(r)})


def describe_capacity_reservations(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    store = reservations_of(self.ec2_backend)
    ids = self._get_param("CapacityReservationIds", []) or []
    for rid in ids:
        if rid not in store:
            raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
    chosen = [store[i] for i in ids] if ids else list(store.values())
    filters = self._filters_from_querystring()
    return ActionResult({"CapacityReservations": [_view(r) for r in chosen if _matches(r, filters)]})


def cancel_capacity_reservation(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    rid = self._get_param("CapacityReservationId")
    r = reservations_of(self.ec2_backend).get(rid)
    if r is None:
        raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
    r["State"] = "cancelled"
    return ActionResult({"Return": True})


def create_placement_group(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    name = self._get_param("GroupName")
    groups = placement_groups_of(self.ec2_backend)
    if not name or any(g["GroupName"] == name for g in groups.values()):
        raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The placement group '{name}' already exists.")
    gid = _new_id("pg")
    g = {"GroupName": name, "GroupId": gid, "State": "available", "Strategy": self._get_param("Strategy") or "cluster",
         "GroupArn": f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}"}
    if self._get_param("PartitionCount"):
        g["PartitionCount"] = int(self._get_param("PartitionCount"))
    if self._get_param("SpreadLevel"):
        g["SpreadLevel"] = self._get_param("SpreadLevel")
    groups[gid] = g
    return ActionResult({"PlacementGroup": g})


def describe_placement_groups(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    groups = list(placement_groups_of(self.ec2_backend).values())
    names = self._get_param("GroupNames", []) or []
    ids = self._get_param("GroupIds", []) or []
    if names:
        missing = [n for n in names if not any(g["GroupName"] == n for g in groups)]
        if missing:
            raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown.")
        groups = [g for g in groups if g["GroupName"] in names]
    if ids:
        groups = [g for g in groups if g["GroupId"] in ids]
    states = self._filters_from_querystring().get("state")
    if states:
        groups = [g for g in groups if g["State"] in states]
    return ActionResult({"PlacementGroups": groups})


def delete_placement_group(self):
    from moto.core.responses import ActionResult

    name = self._get_param("GroupName")
    store = placement_groups_of(self.ec2_backend)
    for gid, g in list(store.items()):
        if g["GroupName"] == name:
            del store[gid]
    return ActionResult({"Return": True})


# -- CreateFleet and TerminateInstances on the backend ------------------------------------------------------
def _template_data(backend, spec: dict) -> dict:
    if spec.get("LaunchTemplateId"):
        lt = backend.get_launch_template(template_id=spec["LaunchTemplateId"])
    else:
        lt = backend.get_launch_template_by_name(name=spec.get("LaunchTemplateName"))
    version = spec.get("Version")
    if version in (None, "$Latest"):
        version = lt.latest_version_number
    elif version == "$Default":
        version = lt.default_version_number
    return lt.get_version(version).data or {}


def _zone_of(backend, override: dict) -> str | None:
    if override.get("AvailabilityZone"):
        return override["AvailabilityZone"]
    if override.get("SubnetId"):
        return backend.get_subnet(override["SubnetId"]).availability_zone
    return None


def _wrap_create_fleet(original):
    def create_fleet(self, *args, **kwargs):
        from moto.ec2.exceptions import EC2ClientError

        configs = kwargs.get("launch_template_configs") or []
        store = reservations_of(self)
        kept, targets, full = [], {}, []
        for cfg in configs:
            data = _template_data(self, cfg.get("LaunchTemplateSpecification") or {})
            rid = (((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {})
                   .get("CapacityReservationId"))
            if not rid:
                kept.append(cfg)
                continue
            r = store.get(rid)
            if r is None or _state(r) != "active":
                full.append(f"{rid}: not active")
                continue
            overrides = [o for o in cfg.get("Overrides") or [{}]
                         if o.get("InstanceType", data.get("InstanceType")) == r["InstanceType"]
                         and _zone_of(self, o) in (None, r["AvailabilityZone"])]
            if r["AvailableInstanceCount"] <= 0 or not overrides:
                full.append(f"{rid}: no capacity left" if overrides else f"{rid}: no override matches it")
                continue
            kept.append(dict(cfg, Overrides=overrides))
            targets[cfg["LaunchTemplateSpecification"].get("LaunchTemplateName") or cfg["LaunchTemplateSpecification"].get("LaunchTemplateId")] = rid
        if not kept:
            raise EC2ClientError("ReservationCapacityExceeded",
                                 "Insufficient capacity in the targeted capacity reservation(s): " + "; ".join(full))
        kwargs["launch_template_configs"] = kept
        spec = dict(kwargs.get("target_capacity_specification") or {})
        if spec.get("DefaultTargetCapacityType") == "capacity-block":
            spec["DefaultTargetCapacityType"] = "on-demand"
            kwargs["target_capacity_specification"] = spec
        fleet = original(self, *args, **kwargs)
        for item in fleet.on_demand_instances:
            launch_spec = item.get("launch_spec")
            lt = getattr(launch_spec, "launch_template_spec", None) or {}
            rid = targets.get(lt.get("LaunchTemplateName")) or targets.get(lt.get("LaunchTemplateId"))
            inst = item["instance"]
            data = _template_data(self, lt) if lt else {}
            placement = data.get("Placement") or {}
            if placement.get("GroupId"):
                inst.placement.group_id = placement["GroupId"]
                if placement.get("PartitionNumber"):
                    inst.placement.partition_number = int(placement["PartitionNumber"])
            if rid:
                inst.capacity_reservation_id = rid
                inst.capacity_reservation_specification = {
                    "CapacityReservationPreference": "capacity-reservations-only",
                    "CapacityReservationTarget": {"CapacityReservationId": rid}}
                if store[rid].get("ReservationType") == "capacity-block":
                    inst.instance_lifecycle = "capacity-block"
                store[rid]["AvailableInstanceCount"] -= 1
        return fleet

    create_fleet.karpenter_lambda_extras = True
    return create_fleet


def _wrap_terminate(original):
    def terminate_instances(self, instance_ids, *args, **kwargs):
        store = reservations_of(self)
        for iid in instance_ids:
            try:
                inst = self.get_instance(iid)
            except Exception:  # noqa: BLE001 - moto raises for an unknown id itself below
                continue
            rid = getattr(inst, "capacity_reservation_id", None)
            if rid and rid in store and not getattr(inst, "karpenter_lambda_released", False):
                store[rid]["AvailableInstanceCount"] += 1
                inst.karpenter_lambda_released = True
        return original(self, instance_ids, *args, **kwargs)

    terminate_instances.karpenter_lambda_extras = True
    return terminate_instances


def install() -> bool:
    """Add the actions above to moto (once per process); False for a moto other than 5.2.x."""
    global _installed
    import moto

    if not str(getattr(moto, "__version__", "")).startswith("5.2."):
        return False
    if _installed:
        return True
    import moto.core.responses as responses
    from moto.ec2.models import EC2Backend
    from moto.ec2.responses import EC2Response

    for fn in (create_capacity_reservation, describe_capacity_reservations, cancel_capacity_reservation,
               create_placement_group, describe_placement_groups, delete_placement_group):
        setattr(EC2Response, fn.__name__, fn)
    if not getattr(EC2Backend.create_fleet, "karpenter_lambda_extras", False):
        EC2Backend.create_fleet = _wrap_create_fleet(EC2Backend.create_fleet)
    if not getattr(EC2Backend.terminate_instances, "karpenter_lambda_extras", False):
        EC2Backend.terminate_instances = _wrap_terminate(EC2Backend.terminate_instances)
    _forget_method_names(responses, EC2Response)
    _installed = True
    return True


def _forget_method_names(responses, cls) -> None:
    """moto_speedups keeps each response class's method names; drop EC2's so the added actions are seen."""
    cached = responses.method_names_from_class
    for cell in getattr(cached, "__closure__", None) or ():
        contents = cell.cell_contents
        if isinstance(contents, dict):
            for k in [k for k in contents if isinstance(k, type) and issubclass(k, cls)]:
                contents.pop(k, None)
