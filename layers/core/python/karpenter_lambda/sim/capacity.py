"""EC2 capacity that runs out (and comes back): what a Scenario ``capacity`` step changes in the simulated EC2.

A step ``{at: 3m, capacity: {capacityType: spot, available: false, instanceTypes: [...], zones: [...]}}`` adds a
:class:`CapacityRule` to moto's EC2 backend of the simulated account (:func:`apply_step`); from then on every
CreateFleet of type ``instant`` (the provisioner's launches, the replacements of consolidation, drift,
interruptions, expiry, ...) is answered as EC2 answers it when some of its overrides are out of capacity:

* each override is an offering (instance type, zone, capacity type): the zone is the override's
  ``AvailabilityZone`` or its subnet's, the capacity type the request's ``DefaultTargetCapacityType`` (``spot`` or
  ``on-demand``), ``reserved`` when the launch template targets a capacity reservation (or the target is
  ``capacity-block``);
* an offering is out of capacity when the last rule matching it (capacity type, and its instance types and zones
  when the rule names them) says ``available: false``; ``available: true`` gives it back (a narrower rule after a
  wider one restores part of it);
* the overrides are tried in the allocation strategy's order -- their ``Priority`` (the launcher sends its price
  order there, so ``lowest-price`` and ``prioritized`` take the same order), then the request's order: each one out
  of capacity tried before one with capacity is an error entry (``InsufficientInstanceCapacity``, with its
  ``LaunchTemplateAndOverrides`` and ``Lifecycle``), and the first one with capacity is launched (moto launches it);
  when none has capacity, every override is an error entry and nothing is launched (no instance, a fleet id).

No rule, or no override out of capacity: the request goes to moto unchanged.  Fleets of type ``maintain`` or
``request`` are not shaped (the launcher sends only ``instant`` ones).  Rules live on moto's backend (a reset of the
mock clears them); :mod:`.moto_ec2` calls :func:`create_fleet` inside its ClientToken idempotency, so a repeated
request gets the first answer, as EC2 gives it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.labels import NODECLAIM_TAG
from ..api.scenario import CAPACITY_TYPES, capacity_text

__all__ = ["CapacityRule", "rule_of", "add_rule", "rules", "is_available", "create_fleet", "apply_step",
           "step_problems", "set_hook", "ICE_CODE"]

_RULES = "karpenter_lambda_capacity_rules"
_HOOK = "karpenter_lambda_capacity_hook"
ICE_CODE = "InsufficientInstanceCapacity"


@dataclass(frozen=True)
class CapacityRule:
    capacity_type: str                         # on-demand | spot | reserved
    available: bool
    instance_types: frozenset[str] | None = None   # None: every instance type
    zones: frozenset[str] | None = None            # None: every zone

    def matches(self, instance_type: str | None, zone: str | None, capacity_type: str) -> bool:
        return (capacity_type == self.capacity_type
                and (self.instance_types is None or instance_type in self.instance_types)
                and (self.zones is None or zone in self.zones))


def rule_of(args: dict) -> CapacityRule:
    """The rule of a (validated) ``capacity`` step's arguments."""
    types, zones = args.get("instanceTypes"), args.get("zones")
    return CapacityRule(args["capacityType"], bool(args["available"]),
                        frozenset(types) if types else None, frozenset(zones) if zones else None)


def _backend(region: str, account: str | None = None):
    """moto's EC2 backend of the simulated account in ``region`` (as ``moto_ec2.backend``, which imports this module)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    return ec2_backends[account or DEFAULT_ACCOUNT_ID][region]


def add_rule(region: str, rule: CapacityRule, account: str | None = None) -> None:
    """From now on, ``rule`` applies to the account's CreateFleet requests in ``region`` (after the earlier ones)."""
    if rule.capacity_type not in CAPACITY_TYPES:
        raise ValueError(f"capacity type must be one of {', '.join(CAPACITY_TYPES)}, got {rule.capacity_type!r}")
    _backend(region, account).__dict__.setdefault(_RULES, []).append(rule)


def set_hook(region: str, hook, account: str | None = None) -> None:
    """``hook(answer)`` after each CreateFleet the rules shaped: ``{"nodeClaim", "capacityType", "errors": [(type,
    zone)], "launched": (type, zone) | None}`` (the simulator's ``InsufficientCapacity`` event); None: no hook."""
    setattr(_backend(region, account), _HOOK, hook)


def rules(region: str, account: str | None = None) -> list[CapacityRule]:
    return list(getattr(_backend(region, account), _RULES, None) or [])


def is_available(rule_list, instance_type: str | None, zone: str | None, capacity_type: str) -> bool:
    """Whether EC2 has capacity for the offering: the last matching rule decides; no rule, it has."""
    for rule in reversed(rule_list or ()):
        if rule.matches(instance_type, zone, capacity_type):
            return rule.available
    return True


# -- CreateFleet ------------------------------------------------------------------------------------------------
def _template(backend, spec: dict):
    if spec.get("LaunchTemplateId"):
        return backend.get_launch_template(template_id=spec["LaunchTemplateId"])
    return backend.get_launch_template_by_name(name=spec.get("LaunchTemplateName"))


def _resolved_spec(lt, spec: dict) -> tuple[dict, dict]:
    """(the LaunchTemplateSpecification as moto answers it: id and version resolved; the version's data)."""
    version = spec.get("Version")
    if version in (None, "$Default"):
        version = lt.default_version_number
    elif version == "$Latest":
        version = lt.latest_version_number
    out = dict(spec, LaunchTemplateId=lt.id, Version=str(version))
    return out, (lt.get_version(version).data or {})


def _zone(backend, override: dict, data: dict) -> str | None:
    if override.get("AvailabilityZone"):
        return override["AvailabilityZone"]
    subnet = override.get("SubnetId") or data.get("SubnetId")
    if subnet:
        return backend.get_subnet(subnet).availability_zone
    return ((data.get("Placement") or {}).get("AvailabilityZone")) or None


def _priority(override: dict) -> float:
    try:
        return float(override.get("Priority"))
    except (TypeError, ValueError):
        return float("inf")


def _message(capacity_type: str, instance_type: str | None, zone: str | None) -> str:
    if capacity_type == "spot":
        return "There is no Spot capacity available that matches your request."
    if capacity_type == "reserved":
        return (f"Insufficient capacity in the capacity reservation for {instance_type} in {zone} "
                "(simulated capacity shortage).")
    return (f"We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested "
            f"({zone}). Our system will be working on provisioning additional capacity.")


def _offers(response, rule_list) -> list[dict] | None:
    """Every override of the request as ``{config, override, spec, type, zone, capacityType, priority, position,
    available}``; None when the request is not one to shape (a launch template moto does not know: moto answers)."""
    b = response.ec2_backend
    configs = response._get_param("LaunchTemplateConfigs", []) or []
    target = response._get_param("TargetCapacitySpecification", {}) or {}
    default = target.get("DefaultTargetCapacityType") or "on-demand"
    out: list[dict] = []
    for ci, cfg in enumerate(configs):
        try:
            spec, data = _resolved_spec(_template(b, cfg.get("LaunchTemplateSpecification") or {}),
                                        cfg.get("LaunchTemplateSpecification") or {})
        except Exception:  # noqa: BLE001 - moto's own answer (the error EC2 gives) follows
            return None
        reservation = ((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {})
        ct = "reserved" if reservation.get("CapacityReservationId") or default == "capacity-block" else (
            "spot" if default == "spot" else "on-demand")
        for oi, ov in enumerate(cfg.get("Overrides") or [{}]):
            it = ov.get("InstanceType") or data.get("InstanceType")
            try:
                zone = _zone(b, ov, data)
            except Exception:  # noqa: BLE001 - an unknown subnet: moto answers
                return None
            out.append({"config": ci, "override": ov, "spec": spec, "type": it, "zone": zone, "capacityType": ct,
                        "priority": _priority(ov), "position": len(out),
                        "available": is_available(rule_list, it, zone, ct)})
    return out


def create_fleet(response, original):
    """moto's CreateFleet (``original(response)``) with the account's capacity rules applied (see the module doc)."""
    from moto.core.responses import ActionResult

    rule_list = getattr(response.ec2_backend, _RULES, None)
    if not rule_list or (response._get_param("Type") or "maintain") != "instant":
        return original(response)
    offers = _offers(response, rule_list)
    if not offers or all(o["available"] for o in offers):
        return original(response)
    errors, failed, chosen = [], [], None
    for o in sorted(offers, key=lambda o: (o["priority"], o["position"])):
        if o["available"]:
            chosen = o
            break
        failed.append(o)
        errors.append({"LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": o["spec"],
                                                      "Overrides": o["override"]},
                       "Lifecycle": "spot" if o["capacityType"] == "spot" else "on-demand",
                       "ErrorCode": ICE_CODE, "ErrorMessage": _message(o["capacityType"], o["type"], o["zone"])})
    if chosen is None:
        from moto.ec2.utils import random_fleet_id

        response.error_on_dryrun()
        _tell(response, failed, None)
        return ActionResult({"FleetId": random_fleet_id(), "Instances": [], "Errors": errors})
    configs = response._get_param("LaunchTemplateConfigs", [])
    kept = [dict(configs[chosen["config"]], Overrides=[chosen["override"]])]
    get_param = response._get_param

    def only_chosen(name, if_none=None):
        return kept if name == "LaunchTemplateConfigs" else get_param(name, if_none)

    response._get_param = only_chosen      # moto reads the overrides through it: it sees the chosen one only
    try:
        answer = original(response)
    finally:
        del response._get_param
    answer.result["Errors"] = errors + list(answer.result.get("Errors") or [])
    _tell(response, failed, chosen)
    return answer


def _tell(response, failed: list[dict], chosen: dict | None) -> None:
    hook = getattr(response.ec2_backend, _HOOK, None)
    if hook is None or not failed:
        return
    claim = ""
    for spec in response._get_param("TagSpecifications", []) or []:
        for tag in spec.get("Tags") or []:
            if tag.get("Key") == NODECLAIM_TAG:
                claim = tag.get("Value") or ""
    hook({"nodeClaim": claim, "capacityType": failed[0]["capacityType"], "errors": [(o["type"], o["zone"]) for o in failed],
          "launched": (chosen["type"], chosen["zone"]) if chosen else None})


# -- the Scenario step -------------------------------------------------------------------------------------------
def apply_step(region: str, args: dict, account: str | None = None) -> tuple[CapacityRule, str]:
    """Add the rule of a ``capacity`` step; (the rule, the ``CapacityChanged`` event's message)."""
    rule = rule_of(args)
    add_rule(region, rule, account)
    return rule, f"EC2 {capacity_text(args)}: CreateFleet answers {ICE_CODE} for it" if not rule.available else \
        f"EC2 {capacity_text(args)}"


def describe_answer(answer: dict) -> str:
    """The ``InsufficientCapacity`` event's message for a hook's ``answer``."""
    errs = answer["errors"]
    shown = ", ".join(f"{t} in {z}" for t, z in errs[:3]) + (f", ... (+{len(errs) - 3})" if len(errs) > 3 else "")
    n = len(errs)
    got = f"launched {answer['launched'][0]} in {answer['launched'][1]}" if answer["launched"] else "launched nothing"
    return (f"CreateFleet: {ICE_CODE} for {n} {answer['capacityType']} offering{'s' if n != 1 else ''} "
            f"({shown}); {got}")


def step_problems(scenario, region: str, zones: list[str], instance_types) -> list[str]:
    """``spec.steps[i].capacity.instanceTypes[j]: ...`` / ``zones[j]`` lines for names the simulated EC2 does not
    have (an instance type not in the catalog, a zone the simulated account has no subnet in): such a step would
    change nothing."""
    from ..api.text import did_you_mean, near

    known = set(instance_types)
    problems = []
    for step in (scenario.steps if scenario is not None else []):
        if step.action != "capacity":
            continue
        where = f"spec.steps[{step.index}].capacity"
        for j, it in enumerate(step.args.get("instanceTypes") or []):
            if it not in known:
                problems.append(f"{where}.instanceTypes[{j}]: unknown instance type {it!r}"
                                f"{did_you_mean(near(it, known), 3)}")
        for j, z in enumerate(step.args.get("zones") or []):
            if z not in zones:
                problems.append(f"{where}.zones[{j}]: {z!r} is not a zone of the simulated region {region} "
                                f"(zones: {', '.join(zones)})")
    return problems
