"""The ``Scenario`` document of ``simulate`` (pure): timed steps on the virtual clock.  A CONTRACT.

```yaml
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: NAME}
spec:
  startTime: "2026-12-07T18:00:00Z"   # optional: the virtual clock's start (default: now)
  steps:                               # each step: `at` (a duration since start) and exactly one action
    - {at: 10m, scale: {kind: Deployment, namespace: default, name: web, replicas: 2}}
    - {at: 20m, apply: <a whole manifest: NodePool, EC2NodeClass, NodeOverlay or workload>}
    - {at: 30m, delete: {kind: Deployment, namespace: default, name: web}}
    - {at: 40m, releaseAMI: {family: al2023}}
    - {at: 50m, nodeUnhealthy: {nodePool: default, count: 1, condition: Ready, status: "False", duration: 31m}}
    - {at: 60m, capacity: {capacityType: spot, available: false, instanceTypes: [c6a.xlarge], zones: [us-east-1a]}}
```

``nodeUnhealthy`` sets a Node condition (``Ready`` by default, or a Node Monitoring Agent condition such as
``AcceleratedHardwareReady``) to ``status`` (default ``"False"``) on the ``count`` oldest nodes of ``nodePool`` (or
on ``node`` by name); with ``duration`` the condition turns ``"True"`` again after it (the node recovers).

``capacity`` makes EC2 capacity of ``capacityType`` (``on-demand``, ``spot`` or ``reserved``) unavailable
(``available: false``) or available again (``available: true``) from that time on, for ``instanceTypes`` in
``zones`` (each optional: absent = every instance type / every zone); the simulated EC2 answers CreateFleet with an
``InsufficientInstanceCapacity`` error per override out of capacity (``sim/capacity.py``).

:func:`parse_scenario` returns a :class:`Scenario` or raises :class:`ScenarioError` whose lines name the step index
and field (``FILE:DOC: Scenario/NAME: spec.steps[3].scale.replicas: must be an integer >= 0``).  Actions are a
table (:data:`ACTIONS`): a new action is one entry with one validator function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from .errors import FieldError
from .labels import PROJECT_API_VERSION
from .text import did_you_mean, near
from .times import to_datetime, to_epoch
from .workloads import MAX_PODS_PER_WORKLOAD, WORKLOAD_KINDS

API_VERSION = PROJECT_API_VERSION          # the old name, kept
KIND = "Scenario"
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")
SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
DELETABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod", "DaemonSet", "NodePool",
                   "EC2NodeClass")
#: what an ``apply`` step may apply (``sim/loop.py`` ``_apply``): a DaemonSet or any other kind stops the run there
APPLICABLE_KINDS = ("NodePool", "EC2NodeClass", "NodeOverlay") + tuple(sorted(WORKLOAD_KINDS - {"DaemonSet"}))
#: the latest ``startTime`` and the latest step ``at`` (100 years): the virtual clock's dates end in the year 9999
LATEST_START = "9000-01-01T00:00:00Z"
MAX_AT_SECONDS = 100 * 365 * 24 * 3600.0
AMI_FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")


class ScenarioError(ValueError):
    """Every problem of a Scenario document, one ``FILE:DOC: Scenario/NAME: field: message`` line each."""


@dataclass
class Step:
    index: int
    at: float          # seconds since the start
    action: str        # a key of ACTIONS
    args: dict

    def describe(self) -> str:
        a = self.args
        if self.action == "scale":
            return f"scale {a['kind']} {a.get('namespace') or 'default'}/{a['name']} to {a['replicas']} replicas"
        if self.action == "delete":
            ns = f"{a.get('namespace') or 'default'}/" if a["kind"] not in ("NodePool", "EC2NodeClass") else ""
            return f"delete {a['kind']} {ns}{a['name']}"
        if self.action == "apply":
            meta = a.get("metadata") or {}
            return f"apply {a.get('kind')} {meta.get('name')}"
        if self.action == "releaseAMI":
            return f"release a new EKS-optimized AMI for {a['family']}"
        if self.action == "nodeUnhealthy":
            which = f"node {a['node']}" if a.get("node") else f"the {a.get('count', 1)} oldest node(s) of NodePool {a['nodePool']}"
            back = f" for {a['duration']}" if a.get("duration") is not None else ""
            return f"{a.get('condition', 'Ready')}={a.get('status', 'False')} on {which}{back}"
        if self.action == "capacity":
            return capacity_text(a)
        if self.action == "interrupt":
            state = f" ({a['state']})" if a.get("state") else ""
            return f"{a['kind']}{state} for the {a.get('count', 1)} oldest NodeClaim(s) of NodePool {a['nodePool']}"
        return self.action


@dataclass
class Scenario:
    name: str
    start_time: float | None = None        # epoch seconds, None = now
    steps: list[Step] = field(default_factory=list)


def parse_duration(value) -> float | None:
    """``90s``, ``10m``, ``1h30m``, ``0s`` -> seconds; None when not a duration."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if value >= 0 else None
    if not isinstance(value, str) or not value:
        return None
    m = _DURATION.match(value.strip())
    if not m or not any(m.groups()):
        return None
    h, mi, s = m.groups()
    return int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)


def _ref(args, where: str, kinds: tuple, need_replicas: bool) -> list[str]:
    problems = []
    if not isinstance(args, dict):
        return [f"{where}: must be an object"]
    if args.get("kind") not in kinds:
        problems.append(f"{where}.kind: must be one of {', '.join(kinds)}, got {args.get('kind')!r}")
    if not isinstance(args.get("name"), str) or not args.get("name"):
        problems.append(f"{where}.name: required")
    if "namespace" in args and not isinstance(args["namespace"], str):
        problems.append(f"{where}.namespace: must be a string")
    if need_replicas:
        r = args.get("replicas")
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            problems.append(f"{where}.replicas: must be an integer >= 0, got {r!r}")
        elif r > MAX_PODS_PER_WORKLOAD:
            problems.append(f"{where}.replicas: {r:,} pods: simulate expands at most {MAX_PODS_PER_WORKLOAD:,} pods per "
                            "workload")
    known = {"kind", "name", "namespace"} | ({"replicas"} if need_replicas else set())
    problems += [f"{where}.{k}: unknown field" for k in sorted(set(args) - known)]
    return problems


def _scale(args, where):
    return _ref(args, where, SCALABLE_KINDS, True)


def _delete(args, where):
    return _ref(args, where, DELETABLE_KINDS, False)


def _apply(args, where):
    meta = args.get("metadata") if isinstance(args, dict) else None
    if not isinstance(args, dict) or not args.get("kind") or not isinstance(meta, dict) or not meta.get("name"):
        return [f"{where}: must be a whole manifest with kind and metadata.name"]
    if args["kind"] not in APPLICABLE_KINDS:
        return [f"{where}.kind: simulate applies only {', '.join(APPLICABLE_KINDS)} in a step, got {args['kind']!r}"]
    return []


def _release_ami(args, where):
    if not isinstance(args, dict) or args.get("family") not in AMI_FAMILIES:
        got = args.get("family") if isinstance(args, dict) else args
        return [f"{where}.family: must be one of {', '.join(AMI_FAMILIES)}, got {got!r}"]
    return [f"{where}.{k}: unknown field" for k in sorted(set(args) - {"family"})]


INTERRUPT_KINDS = ("SpotInterruption", "RebalanceRecommendation", "ScheduledChange", "StateChange",
                   "CapacityReservationInterruption")
INSTANCE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")


def _interrupt(args, where):
    if not isinstance(args, dict):
        return [f"{where}: must be a mapping with kind, nodePool, count (and state for StateChange)"]
    problems = []
    if args.get("kind") not in INTERRUPT_KINDS:
        problems.append(f"{where}.kind: must be one of {', '.join(INTERRUPT_KINDS)}, got {args.get('kind')!r}")
    if not isinstance(args.get("nodePool"), str) or not args.get("nodePool"):
        problems.append(f"{where}.nodePool: required (the NodePool whose oldest NodeClaims are interrupted)")
    count = args.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.append(f"{where}.count: must be an integer >= 1, got {count!r}")
    if args.get("kind") == "StateChange":
        if args.get("state") not in INSTANCE_STATES:
            problems.append(f"{where}.state: must be one of {', '.join(INSTANCE_STATES)}, got {args.get('state')!r}")
    elif "state" in args:
        problems.append(f"{where}.state: only for kind StateChange")
    problems += [f"{where}.{k}: unknown field" for k in sorted(set(args) - {"kind", "nodePool", "count", "state"})]
    return problems


CONDITION_STATUSES = ("False", "Unknown", "True")


def _node_unhealthy(args, where):
    if not isinstance(args, dict):
        return [f"{where}: must be a mapping with nodePool (or node), and optionally count, condition, status, duration"]
    problems = []
    if bool(args.get("nodePool")) == bool(args.get("node")):
        problems.append(f"{where}: exactly one of nodePool (its oldest nodes) or node (a Node name)")
    for k in ("nodePool", "node", "condition"):
        if k in args and (not isinstance(args[k], str) or not args[k]):
            problems.append(f"{where}.{k}: must be a non-empty string")
    count = args.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.append(f"{where}.count: must be an integer >= 1, got {count!r}")
    elif "count" in args and args.get("node"):
        problems.append(f"{where}.count: only with nodePool")
    if args.get("status", "False") not in CONDITION_STATUSES:
        problems.append(f"{where}.status: must be one of {', '.join(CONDITION_STATUSES)} (quoted), got {args.get('status')!r}")
    if "duration" in args and parse_duration(args["duration"]) is None:
        problems.append(f"{where}.duration: must be a duration like 90s, 10m or 1h30m, got {args['duration']!r}")
    elif "duration" in args and not parse_duration(args["duration"]) <= MAX_AT_SECONDS:
        problems.append(f"{where}.duration: {args['duration']} is more than the largest value accepted, "
                        f"{int(MAX_AT_SECONDS // 3600)}h (100 years)")
    known = {"nodePool", "node", "count", "condition", "status", "duration"}
    problems += [f"{where}.{k}: unknown field" for k in sorted(set(args) - known)]
    return problems


#: a ``capacity`` step's capacity types (Karpenter's ``karpenter.sh/capacity-type`` values)
CAPACITY_TYPES = ("on-demand", "spot", "reserved")
_INSTANCE_TYPE = re.compile(r"^[a-z0-9][a-z0-9-]*\.[a-z0-9-]+$")


def _capacity(args, where):
    if not isinstance(args, dict):
        return [f"{where}: must be a mapping with capacityType and available (and optionally instanceTypes, zones)"]
    problems = []
    if "capacityType" not in args:
        problems.append(f"{where}.capacityType: required (one of {', '.join(CAPACITY_TYPES)})")
    elif args["capacityType"] not in CAPACITY_TYPES:
        problems.append(f"{where}.capacityType: must be one of {', '.join(CAPACITY_TYPES)}, got {args['capacityType']!r}")
    if "available" not in args:
        problems.append(f"{where}.available: required (false: the capacity runs out; true: it is back)")
    elif not isinstance(args["available"], bool):
        problems.append(f"{where}.available: must be a boolean (true or false, unquoted), got {args['available']!r}")
    for key, what, pattern in (("instanceTypes", "an instance type name like c6a.xlarge", _INSTANCE_TYPE),
                               ("zones", "an availability zone name like us-east-1a", None)):
        if key not in args:
            continue
        values = args[key]
        if not isinstance(values, list) or not values:
            problems.append(f"{where}.{key}: must be a non-empty list (leave it out for every "
                            f"{'instance type' if key == 'instanceTypes' else 'zone'}), got {values!r}")
            continue
        for j, v in enumerate(values):
            if not isinstance(v, str) or not v or (pattern is not None and not pattern.match(v)):
                problems.append(f"{where}.{key}[{j}]: must be {what}, got {v!r}")
    known = {"capacityType", "available", "instanceTypes", "zones"}
    problems += [f"{where}.{k}: unknown field" for k in sorted(set(args) - known)]
    return problems


def capacity_text(a: dict) -> str:
    """``spot capacity unavailable (c6a.xlarge in us-east-1a)``: what a ``capacity`` step changes."""
    types = ", ".join(a.get("instanceTypes") or []) or "every instance type"
    zones = ", ".join(a.get("zones") or []) or "every zone"
    state = "available again" if a.get("available") else "unavailable"
    return f"{a.get('capacityType')} capacity {state} ({types} in {zones})"


# action -> validator(args, where) -> [problem, ...]; extend this table to add an action
ACTIONS: dict[str, Callable[[object, str], list[str]]] = {
    "scale": _scale,
    "apply": _apply,
    "delete": _delete,
    "releaseAMI": _release_ami,
    "interrupt": _interrupt,
    "nodeUnhealthy": _node_unhealthy,
    "capacity": _capacity,
}


def parse_scenario(doc: dict, file: str = "<input>", index: int = 0) -> Scenario:
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = meta.get("name") or ""
    name = name if isinstance(name, str) else ""
    prefix = f"{file}:{index}: {KIND}/{name or '<unnamed>'}: "
    problems: list[str] = []
    if doc.get("apiVersion") != API_VERSION:
        problems.append(f"apiVersion: must be {API_VERSION}, got {doc.get('apiVersion')!r}")
    if not name:
        problems.append("metadata.name: required")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise ScenarioError(prefix + "spec: must be an object")
    problems += [f"spec.{k}: unknown field" for k in sorted(set(spec) - {"startTime", "steps"})]
    start = None
    if spec.get("startTime") is not None:
        start = to_epoch(to_datetime(str(spec["startTime"])))     # text only (a bare number is not a time)
        if start is None:
            problems.append(f"spec.startTime: not an RFC 3339 time: {spec['startTime']!r}")
        elif start >= to_epoch(to_datetime(LATEST_START)):
            problems.append(f"spec.startTime: {spec['startTime']} is too late: at most {LATEST_START} (the virtual "
                            f"clock's dates end in the year 9999)")
            start = None
    steps_in = spec.get("steps") or []
    if not isinstance(steps_in, list):
        problems.append("spec.steps: must be a list")
        steps_in = []
    steps: list[Step] = []
    last = 0.0
    for i, raw in enumerate(steps_in):
        where = f"spec.steps[{i}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: must be an object with `at` and one action")
            continue
        at = parse_duration(raw.get("at"))
        if at is None:
            problems.append(f"{where}.at: must be a duration like 90s, 10m or 1h30m, got {raw.get('at')!r}")
        elif not at <= MAX_AT_SECONDS:
            problems.append(f"{where}.at: {raw.get('at')} is more than the largest value accepted, "
                            f"{int(MAX_AT_SECONDS // 3600)}h (100 years)")
            at = None
        actions = [k for k in raw if k != "at"]
        unknown = [k for k in actions if k not in ACTIONS]
        for k in unknown:
            problems.append(f"{where}.{k}: unknown action (known: {', '.join(ACTIONS)})")
        known = [k for k in actions if k in ACTIONS]
        if len(actions) == 0:
            problems.append(f"{where}: needs one action ({', '.join(ACTIONS)})")
        elif len(actions) > 1 and not unknown:
            problems.append(f"{where}: exactly one action per step, got {', '.join(actions)}")
        if len(known) == 1 and len(actions) == 1:
            problems += ACTIONS[known[0]](raw[known[0]], f"{where}.{known[0]}")
        if at is not None:
            if at < last:
                problems.append(f"{where}.at: steps must be in time order ({raw.get('at')} is before the previous step)")
            last = max(last, at)
            if len(known) == 1 and len(actions) == 1:
                steps.append(Step(index=i, at=at, action=known[0], args=raw[known[0]]))
    if problems:
        raise ScenarioError("\n".join(prefix + p for p in problems))
    return Scenario(name=name, start_time=start, steps=steps)


# -- workloads named by steps ------------------------------------------------------------------------------------
def workload_step_errors(scenario: dict, given: set[tuple[str, str, str]]) -> list[FieldError]:
    """Each ``scale`` or ``delete`` step naming a workload (or an EC2NodeClass) that does not exist at that step:
    (kind, namespace, name; namespace "" for an EC2NodeClass) neither among the manifests given (``given``) nor applied
    by an earlier step, or deleted by one since -- the run would stop there (``Scenario step 0 (...): Deployment
    default/nosuch does not exist``).  A DaemonSet given in the files cannot be deleted by a step (its pods are the
    simulator's, per node), so such a step is refused too."""
    steps = ((scenario.get("spec") or {}) if isinstance(scenario.get("spec"), dict) else {}).get("steps")
    exists = {key for key in given if key[0] in WORKLOAD_KINDS or key[0] == "EC2NodeClass"}
    by_step: set[tuple[str, str, str]] = set()   # applied by a step (a DaemonSet: deletable then)
    errors: list[FieldError] = []
    for i, raw in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(raw, dict):
            continue
        action = next((a for a in ("scale", "delete", "apply") if isinstance(raw.get(a), dict)), None)
        if action is None:
            continue
        args = raw[action]
        if action == "apply":
            meta = args.get("metadata") if isinstance(args.get("metadata"), dict) else {}
            kind = args.get("kind") if isinstance(args.get("kind"), str) else ""
            key = (kind, "" if kind == "EC2NodeClass" else meta.get("namespace") or "default", meta.get("name"))
            if (kind in WORKLOAD_KINDS or kind == "EC2NodeClass") and isinstance(key[1], str) and isinstance(key[2], str):
                exists.add(key)
                by_step.add(key)
            continue
        kind, name, namespace = args.get("kind"), args.get("name"), args.get("namespace") or "default"
        if not isinstance(kind, str):
            continue   # parse_scenario reports it
        if kind == "EC2NodeClass":
            namespace = ""
        elif kind not in WORKLOAD_KINDS:
            continue   # a NodePool: checked against the NodePools (crosscheck.scenario_step_errors)
        if not isinstance(name, str) or not name or not isinstance(namespace, str):
            continue   # parse_scenario reports it
        key, where = (kind, namespace, name), f"spec.steps[{i}].{action}.name"
        step = f"step {i} ({action} at {raw.get('at')})"
        if kind == "EC2NodeClass" and key not in exists:
            known = sorted(n for k, _, n in exists if k == kind)
            errors.append(FieldError(where, f"{step}: EC2NodeClass {name!r} does not exist at this step "
                                            f"(EC2NodeClasses: {', '.join(known) or 'none'}){did_you_mean(near(name, known))}"))
        elif key not in exists:
            errors.append(FieldError(where, f"{step}: {kind} {namespace}/{name} does not exist at this step "
                                            f"{_others(kind, namespace, name, exists)}"))
        elif action == "delete" and kind == "DaemonSet" and key not in by_step:
            errors.append(FieldError(where, f"{step}: simulate cannot delete the {kind} {namespace}/{name} given in "
                                            f"the files (only a {kind} an earlier apply step made)"))
        elif action == "delete":
            exists.discard(key)
            by_step.discard(key)
    return errors


def _others(kind: str, namespace: str, name: str, exists: set[tuple[str, str, str]]) -> str:
    """What there is instead: the same name as another kind or in another namespace, else the kind's names there."""
    elsewhere = sorted(f"{k} {ns}/{n}" for k, ns, n in exists if n == name and (k, ns) != (kind, namespace))
    if elsewhere:
        return f"(there is {' and '.join(elsewhere)})"
    names = sorted(n for k, ns, n in exists if (k, ns) == (kind, namespace))
    many = "s" if not kind.endswith("s") else "es"
    listed = f"({kind}{many} in {namespace}: {', '.join(names[:10])}{', ...' if len(names) > 10 else ''})" if names \
        else f"(no {kind} in namespace {namespace} among the manifests given)"
    return listed + did_you_mean(near(name, names))
