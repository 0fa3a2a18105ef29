"""The scheduler config: the parts of the cluster's kube-scheduler configuration the simulation must mirror (pure).

Karpenter's ``--scheduler-config`` / ``SCHEDULER_CONFIG`` (``pkg/operator/options/options.go``
``SchedulerConfiguration``, ``ParseSchedulerConfiguration``, ``Validate``; Karpenter v1.15), ours the setting
:data:`SCHEDULER_CONFIG_ENV`: a YAML or JSON document whose only field today is kube-scheduler's PodTopologySpread
``defaultConstraints``::

    podTopologySpread:
      defaultConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway

Every pod that declares no ``topologySpreadConstraints`` gets these, each with a label selector deduced for the pod
(``scheduling/default_spread.py``), so the solver counts the pods kube-scheduler will spread.

Decoding is strict, as upstream's ``yaml.UnmarshalStrict``: an unknown field at any level, a field of the wrong type
(``maxSkew: "1"``, ``maxSkew: 1.5``), a duplicate mapping key or a malformed document is an error.  Validation is
upstream's (which mirrors kube-scheduler's ``ValidatePodTopologySpreadArgs``): ``maxSkew`` > 0; ``topologyKey`` set
and a qualified name; ``whenUnsatisfiable`` ``DoNotSchedule`` or ``ScheduleAnyway``; no ``labelSelector`` (it is
deduced per pod); no ``matchLabelKeys`` (inert upstream: the deduced selector replaces what it would add); no two
constraints with the same (``topologyKey``, ``whenUnsatisfiable``).  Beyond upstream, the fields a pod's own
constraint is refused for are refused here too: ``minDomains`` must be > 0 and ``nodeAffinityPolicy`` /
``nodeTaintsPolicy`` ``Honor`` or ``Ignore`` (upstream passes them through unchecked).

A ``null`` field is read as absent (as Go decodes it into a nil pointer or slice), so ``labelSelector: null`` and
``matchLabelKeys: []`` are accepted and dropped; the constraints are otherwise kept as given (camelCase dicts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from .validators import label_key_problem

__all__ = ["SCHEDULER_CONFIG_ENV", "SchedulerConfig", "SchedulerConfigError", "parse_scheduler_config",
           "DO_NOT_SCHEDULE", "SCHEDULE_ANYWAY"]

SCHEDULER_CONFIG_ENV = "KARPENTER_LAMBDA_SCHEDULER_CONFIG"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")
INT32_MAX = 2**31 - 1

# the fields of corev1.TopologySpreadConstraint (strict decoding refuses any other)
_CONSTRAINT_FIELDS = ("maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                      "nodeAffinityPolicy", "nodeTaintsPolicy", "matchLabelKeys")
_ROOT_FIELDS = ("podTopologySpread",)
_SPREAD_FIELDS = ("defaultConstraints",)


class SchedulerConfigError(ValueError):
    """The setting does not decode or validate; the message names where it came from and the field path:
    ``environment variable KARPENTER_LAMBDA_SCHEDULER_CONFIG: podTopologySpread.defaultConstraints[0].maxSkew: must
    be greater than 0``.  ``problems``: each problem alone (``field.path: message``), without the origin."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems) if problems is not None else [message]


@dataclass(frozen=True)
class SchedulerConfig:
    """The decoded, validated setting.  ``default_constraints``: the TopologySpreadConstraint dicts (camelCase, as
    given, null fields dropped, never a ``labelSelector``), in the document's order; () when none."""

    default_constraints: tuple = ()

    def to_json(self) -> str:
        """The canonical JSON document (sorted keys, no spaces) that :func:`parse_scheduler_config` reads back
        equal; ``{}`` when there are no default constraints."""
        if not self.default_constraints:
            return "{}"
        doc = {"podTopologySpread": {"defaultConstraints": [dict(c) for c in self.default_constraints]}}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def __hash__(self) -> int:   # the constraints are dicts: hash the canonical text (equal configs, equal text)
        return hash(self.to_json())


def parse_scheduler_config(raw: Any, origin: str = "scheduler config") -> SchedulerConfig | None:
    """Decode and validate the setting (module doc).

    ``raw``: None, ``""`` or whitespace -> None (not set: nothing is defaulted, as upstream's empty flag); a str (a
    YAML or JSON document) or an already-parsed dict.  A document that is empty (``null``, only comments), ``{}``,
    or has no ``defaultConstraints`` -> ``SchedulerConfig(())`` (set, defaulting nothing).  Anything else that
    is not a mapping, or does not decode or validate -> :class:`SchedulerConfigError` naming ``origin``.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", errors="replace")
    doc = _load(raw, origin) if isinstance(raw, str) else raw
    errors: list[str] = []
    constraints = _decode(doc, errors)
    if errors:
        raise SchedulerConfigError(f"{origin}: " + "; ".join(errors), errors)
    return SchedulerConfig(tuple(constraints))


# -- decoding ---------------------------------------------------------------------------------------------------
class _StrictLoader(yaml.SafeLoader):
    """SafeLoader refusing duplicate mapping keys (as ``yaml.UnmarshalStrict``) and leaving dates as strings."""


_StrictLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (dict, list)):
            continue   # an unhashable key: the base constructor reports it
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _load(text: str, origin: str) -> Any:
    """The document in ``text``: JSON when it is JSON, else YAML (a superset in practice; kept to one document)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as e:
        if "duplicate key" in str(e):
            raise SchedulerConfigError(f"{origin}: not valid JSON: {e}", [f"not valid JSON: {e}"]) from None
    try:
        return yaml.load(text, Loader=_StrictLoader)   # noqa: S506 -- a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        what = f"not valid YAML or JSON{where}: {problem}"
        raise SchedulerConfigError(f"{origin}: {what}", [what]) from None


def _unknown(obj: dict, allowed: tuple, path: str, errors: list[str]) -> None:
    for k in obj:
        if k not in allowed:
            where = f"{path}.{k}" if path else str(k)
            errors.append(f"{where}: unknown field (allowed: {', '.join(allowed)})")


def _decode(doc: Any, errors: list[str]) -> list[dict]:
    if doc is None:
        return []
    if not isinstance(doc, dict):
        errors.append(f"must be a mapping with the field podTopologySpread, not {type(doc).__name__}")
        return []
    _unknown(doc, _ROOT_FIELDS, "", errors)
    spread = doc.get("podTopologySpread")
    if spread is None:
        return []
    if not isinstance(spread, dict):
        errors.append(f"podTopologySpread: must be a mapping, not {type(spread).__name__}")
        return []
    _unknown(spread, _SPREAD_FIELDS, "podTopologySpread", errors)
    items = spread.get("defaultConstraints")
    if items is None:
        return []
    if not isinstance(items, list):
        errors.append(f"podTopologySpread.defaultConstraints: must be a list, not {type(items).__name__}")
        return []
    out: list[dict] = []
    seen: dict[tuple, int] = {}
    for i, item in enumerate(items):
        path = f"podTopologySpread.defaultConstraints[{i}]"
        con = _constraint(item, path, errors)
        if con is None:
            continue
        pair = (con.get("topologyKey"), con.get("whenUnsatisfiable"))
        if pair in seen:   # upstream's validateConstraintNotRepeat
            errors.append(f"{path}: duplicate of defaultConstraints[{seen[pair]}] "
                          f"(topologyKey {pair[0]}, whenUnsatisfiable {pair[1]})")
        else:
            seen[pair] = i
        out.append(con)
    return out


def _is_int32(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -INT32_MAX - 1 <= v <= INT32_MAX


def _constraint(item: Any, path: str, errors: list[str]) -> dict | None:
    """One default constraint, null fields dropped, or None (with its errors) when it is not one."""
    if not isinstance(item, dict):
        errors.append(f"{path}: must be a mapping (a TopologySpreadConstraint), not {type(item).__name__}")
        return None
    before = len(errors)
    _unknown(item, _CONSTRAINT_FIELDS, path, errors)
    con = {k: v for k, v in item.items() if v is not None}
    if con.get("matchLabelKeys") == []:
        del con["matchLabelKeys"]

    skew = con.get("maxSkew")
    if skew is not None and not _is_int32(skew):
        errors.append(f"{path}.maxSkew: must be an integer, not {skew!r}")
    elif (skew or 0) <= 0:
        errors.append(f"{path}.maxSkew: must be greater than 0")

    key = con.get("topologyKey")
    if key is None or key == "":
        errors.append(f"{path}.topologyKey: must be set")
    elif not isinstance(key, str):
        errors.append(f"{path}.topologyKey: must be a string, not {key!r}")
    elif (problem := label_key_problem(key)) is not None:
        errors.append(f"{path}.topologyKey: {problem}")

    when = con.get("whenUnsatisfiable")
    if when is None or when == "":
        errors.append(f"{path}.whenUnsatisfiable: must be set to {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")
    elif when not in WHEN_UNSATISFIABLE:
        errors.append(f"{path}.whenUnsatisfiable: {when!r} must be {DO_NOT_SCHEDULE} or {SCHEDULE_ANYWAY}")

    if "labelSelector" in con:
        errors.append(f"{path}.labelSelector: must not be set, as selectors are deduced for each pod")
    if "matchLabelKeys" in con:
        errors.append(f"{path}.matchLabelKeys: must not be set, as it has no effect on default constraints")

    md = con.get("minDomains")
    if md is not None and not _is_int32(md):
        errors.append(f"{path}.minDomains: must be an integer, not {md!r}")
    elif md is not None and md <= 0:
        errors.append(f"{path}.minDomains: must be greater than 0")
    for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        v = con.get(policy)
        if v is not None and v not in NODE_INCLUSION_POLICIES:
            errors.append(f"{path}.{policy}: {v!r} must be Honor or Ignore")
    return con if len(errors) == before else None
