"""Karpenter v1 CRD defaults and validation for NodePool, EC2NodeClass and NodeClaim.

``validate_and_default(kind, doc) -> (defaulted_doc, [FieldError])`` walks a
manifest with the schemas below (see :mod:`.schema`), fills in what Karpenter's
CRDs default, and reports EVERY problem with its field path, e.g.
``spec.template.spec.requirements[2].operator``.

The rules follow Karpenter's CRDs (OpenAPI + CEL ``x-kubernetes-validations``)
in kubernetes-sigs/karpenter ``pkg/apis/crds/karpenter.sh_nodepools.yaml`` and
aws/karpenter-provider-aws ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml``
plus the runtime checks Karpenter does in Go (duplicate taints, cron parsing).
Deliberate differences are listed in docs/api.md.  Pure: no I/O.
"""

from __future__ import annotations

import copy
import ipaddress
import re

from . import labels as L
from .durations import DURATION_RE, NILLABLE_DURATION_RE, DurationError, parse_go_duration
from .errors import FieldError
from .objects import ALIAS_FAMILIES
from .offpeak import spec_schema as _offpeak_spec_schema
from .overlay import spec_schema as _overlay_spec_schema
from .quantity import QuantityError, parse_quantity
from .kuberules import TAINT_EFFECTS
from .field_status import refusal
from .kubelet_config import EXPRESSIONS_NOT_SUPPORTED, KUBELET_VERSION, family_problems
from .kubelet_config import PASSTHROUGH as KUBELET_PASSTHROUGH
from .schema import NOT_SUPPORTED, AnyValue, Bool, Int, List, Map, Node, Obj, OneOf, Refused, Str, describe, index, join, key
from .validators import (BUDGET, CONSOLIDATION_POLICIES, DISRUPTION_REASONS, DURATION_MSG, NILLABLE_DURATION_MSG,
                         date_time_check, dns_subdomain_check, label_key_problem, label_value_check, label_value_problem)

__all__ = [
    "validate_and_default",
    "apply_defaults",
    "SCHEMAS",
    "OPERATORS",
    "CONSOLIDATION_POLICIES",
    "DISRUPTION_REASONS",
    "AMI_FAMILIES",
    "ALIAS_FAMILIES",
    "label_key_problem",
    "label_value_problem",
    "restricted_label_problem",
]

# ----------------------------------------------------------------------------- constants
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
NUMERIC_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")
WINDOWS_ALIASES = ("windows2019", "windows2022", "windows2025")
EVICTION_SIGNALS = ("memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available")
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
FORBIDDEN_TAG_KEYS = ("eks:eks-cluster-name", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass")
INSTANCE_TENANCY = L.INSTANCE_TENANCY
TENANCY_VALUES = L.TENANCY_VALUES

INT64_MAX = 2**63 - 1   # a Gt/Lt/Gte/Lte value: the CRD's CEL int(values[0]) fails above it

_PERCENT_RE = re.compile(r"^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$")
_VOLUME_SIZE_RE = re.compile(r"^([0-9]+)(Gi|G|Ti|T)$")
_VOLUME_SIZE_MAX = {"Gi": 59000, "G": 64000, "Ti": 58, "T": 64}
# The EC2NodeClass CRD's volumeSize pattern, anchored as the API server applies it: no leading zero, and Ti only
# 1-17, 20-27, 30-37, 40-47, 50-58 (its alternation skips 18Ti, 19Ti, 28Ti, ...).  Its empty alternatives (a bare
# "Ti" or "T") are refused by the range check above (docs/api.md, deliberate differences).
_VOLUME_SIZE_CRD_RE = re.compile(r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi"
                                 r"|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G"
                                 r"|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$")


# ----------------------------------------------------------------------------- label helpers
def restricted_label_problem(k: str, *, allow_nodepool: bool = False) -> str | None:
    """Karpenter's restricted label keys: the CEL rules of the CRDs (v1.9 and later) on NodePool template labels and
    requirement keys, and on NodeClaim and NodeOverlay requirement keys (``allow_nodepool``).

    Restricted: ``kubernetes.io/hostname``; ``karpenter.sh/nodepool`` in a NodePool; the ``karpenter.sh`` domain but
    capacity-type (and nodepool); the ``karpenter.k8s.aws`` domain but its well-known keys (``L.AWS_WELL_KNOWN``,
    exact keys).  The domain is what precedes the first '/' (the whole key without one), matched by its end as CEL's
    ``find("^([^/]+)").endsWith(...)``.  Any other domain is the user's, ``kubernetes.io`` and ``k8s.io`` included
    (``node-role.kubernetes.io/worker``): the kubelet may not set those on itself, so registration puts them on the
    Node (``adapters/aws/userdata.kubelet_labels``, ``controllers/lifecycle.py``)."""
    domain = k.split("/", 1)[0]
    if k == L.HOSTNAME:
        return 'label "kubernetes.io/hostname" is restricted: Karpenter sets it on every node'
    if k == L.NODEPOOL:
        if allow_nodepool:
            return None
        return 'label "karpenter.sh/nodepool" is restricted: Karpenter sets it to the NodePool\'s name'
    if domain.endswith("karpenter.sh") and k != L.CAPACITY_TYPE:
        allowed = "karpenter.sh/capacity-type and karpenter.sh/nodepool" if allow_nodepool else "karpenter.sh/capacity-type"
        return f'label domain "karpenter.sh" is restricted: only {allowed} may be used, not {k!r}'
    if domain.endswith("karpenter.k8s.aws") and k not in L.AWS_WELL_KNOWN:
        return f'label domain "karpenter.k8s.aws" is restricted: {k!r} is not one of its well-known labels'
    return None


def _template_label_key(k: str) -> str | None:
    return label_key_problem(k) or restricted_label_problem(k)


def _quantity(nonneg: bool = False, allow_int: bool = True):
    def parse(value):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or (isinstance(value, (int, float)) and not allow_int):
            what = "a string quantity such as 500m or 4Gi" if not allow_int else "a quantity such as 100, 500m or 4Gi"
            return f"must be {what}, got {describe(value)}"
        try:
            q = parse_quantity(value)
        except QuantityError as e:
            return str(e)
        if nonneg and q < 0:
            return f"{value!r} must not be negative"
        return None

    return parse


def _resource_name_problem(k: str) -> str | None:
    return label_key_problem(k) and f"invalid resource name {k!r}"


# ----------------------------------------------------------------------------- shared pieces
def _check_requirement_factory(allow_nodepool: bool):
    def check(req: dict, path: str, errors: list[FieldError]) -> None:
        k, op = req.get("key"), req.get("operator")
        values = req.get("values") if isinstance(req.get("values"), list) else []
        if isinstance(k, str):
            problem = label_key_problem(k) or restricted_label_problem(k, allow_nodepool=allow_nodepool)
            if problem:
                errors.append(FieldError(join(path, "key"), problem))
        for i, v in enumerate(values):
            if isinstance(v, str):
                problem = label_value_problem(v)
                if problem:
                    errors.append(FieldError(index(join(path, "values"), i), problem))
        if op not in OPERATORS:
            return
        vpath = join(path, "values")
        if op == "In" and not values:
            errors.append(FieldError(vpath, "operator In requires at least one value"))
        if op in ("Exists", "DoesNotExist") and values:
            errors.append(FieldError(vpath, f"must be empty for operator {op} (got {len(values)} value{'s' if len(values) != 1 else ''})"))
        if op in NUMERIC_OPERATORS:
            if len(values) != 1:
                errors.append(FieldError(vpath, f"operator {op} requires exactly one value, a non-negative integer (got {len(values)})"))
            elif not (isinstance(values[0], str) and values[0].isdigit() and values[0].isascii()):
                errors.append(FieldError(index(vpath, 0), f"operator {op} requires a non-negative integer, got {values[0]!r}"))
            elif int(values[0]) > INT64_MAX:
                errors.append(FieldError(index(vpath, 0), f"operator {op} requires an integer of at most {INT64_MAX} "
                                                          f"(the CRD reads it as a 64-bit int), got {values[0]!r}"))
        mv = req.get("minValues")
        if op == "In" and isinstance(mv, int) and not isinstance(mv, bool) and values and mv > len(values):
            errors.append(FieldError(join(path, "minValues"), f"minValues {mv} exceeds the {len(values)} value{'s' if len(values) != 1 else ''} given for operator In"))
        if k == L.CAPACITY_TYPE and op == "In" and values and not any(v in L.CAPACITY_TYPES for v in values):
            errors.append(FieldError(vpath, f"karpenter.sh/capacity-type must include at least one of {', '.join(L.CAPACITY_TYPES)} (got {', '.join(map(str, values))})"))
        if k == INSTANCE_TENANCY and op == "In":
            for i, v in enumerate(values):
                if v not in TENANCY_VALUES:
                    errors.append(FieldError(index(vpath, i), f"unsupported instance tenancy {v!r}: must be one of {', '.join(TENANCY_VALUES)}"))
        if k == INSTANCE_TENANCY and not allow_nodepool and (   # a NodePool's (not an overlay's selector)
                (op == "In" and values and L.TENANCY_DEFAULT not in values)
                or (op == "NotIn" and L.TENANCY_DEFAULT in values) or op == "DoesNotExist"):
            # every node would be labelled dedicated and still launched with default tenancy: refused, not ignored
            errors.append(FieldError(vpath if op != "DoesNotExist" else join(path, "operator"),
                                     f"{NOT_SUPPORTED} (dedicated tenancy: karpenter-lambda launches default-tenancy "
                                     f"instances only, so a NodePool must allow instance-tenancy default)"))

    return check


def _requirement(allow_nodepool: bool) -> Obj:
    return Obj(
        {
            "key": Str(max_len=316),
            "operator": Str(enum=OPERATORS),
            "values": List(Str()),
            "minValues": Int(minimum=1, maximum=50),
        },
        required=("key", "operator"),
        checks=[_check_requirement_factory(allow_nodepool)],
    )


def _check_taint(t: dict, path: str, errors: list[FieldError]) -> None:
    k, v = t.get("key"), t.get("value")
    if isinstance(k, str) and k:
        problem = label_key_problem(k)
        if problem:
            errors.append(FieldError(join(path, "key"), problem.replace("label key", "taint key")))
    if v == "":
        # the CRD's pattern needs at least one character: the API server rejects "" (a taint without a value omits it)
        errors.append(FieldError(join(path, "value"), "must not be empty (Karpenter's CRD pattern needs at least one "
                                                      "character): omit 'value' for a taint without one"))
    elif isinstance(v, str):
        problem = label_value_problem(v)
        if problem:
            problem = problem.replace("label value", "taint value").replace("must be empty or start", "must start")
            errors.append(FieldError(join(path, "value"), problem))


TAINT = Obj(
    {
        "key": Str(not_empty=True),
        "value": Str(),
        "effect": Str(enum=TAINT_EFFECTS),
        "timeAdded": Str(checks=[date_time_check]),
    },
    required=("key", "effect"),
    checks=[_check_taint],
)


def _check_taint_duplicates(spec: dict, path: str, errors: list[FieldError]) -> None:
    """Karpenter's runtime validation: a key+effect pair may appear once across taints and startupTaints."""
    seen: dict[tuple, str] = {}
    for field in ("taints", "startupTaints"):
        items = spec.get(field)
        if not isinstance(items, list):
            continue
        for i, t in enumerate(items):
            if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not isinstance(t.get("effect"), str):
                continue
            pair = (t["key"], t["effect"])
            here = index(join(path, field), i)
            if pair in seen:
                errors.append(FieldError(here, f"duplicate taint key {t['key']!r} with effect {t['effect']} (already at {seen[pair]})"))
            else:
                seen[pair] = here


_GROUP_WITH_VERSION_RE = re.compile(r"^[^/]+/v[0-9]+((alpha|beta)[0-9]+)?$")


def _check_group(value, path, errors):
    # The CRD pattern is ^[^/]*$, but an upstream example uses "karpenter.k8s.aws/v1"; accept group/version.
    if isinstance(value, str) and "/" in value and not _GROUP_WITH_VERSION_RE.match(value):
        errors.append(FieldError(path, f"invalid group {value!r}: must be an API group such as karpenter.k8s.aws (no '/')"))


NODE_CLASS_REF = Obj(
    {
        "group": Str(not_empty=True, checks=[_check_group]),
        "kind": Str(not_empty=True),
        "name": Str(not_empty=True),
    },
    required=("group", "kind", "name"),
)

def _expire_after() -> Str:
    return Str(pattern=NILLABLE_DURATION_RE.pattern, pattern_msg=NILLABLE_DURATION_MSG, default="720h")


def _termination_grace_period() -> Str:
    return Str(pattern=DURATION_RE.pattern, pattern_msg=DURATION_MSG)


def _metadata() -> Obj:
    return Obj(
        {
            "name": Str(not_empty=True, checks=[dns_subdomain_check]),
            "generateName": Str(),
            "namespace": Str(),
            "uid": Str(),
            "resourceVersion": Str(),
            "generation": Int(minimum=0),
            "creationTimestamp": AnyValue(),
            "deletionTimestamp": AnyValue(),
            "deletionGracePeriodSeconds": Int(minimum=0),
            "labels": Map(Str(max_len=63, checks=[label_value_check]), key_check=label_key_problem),
            "annotations": Map(Str(), key_check=_annotation_key_problem, checks=[_annotations_size]),
            "ownerReferences": List(AnyValue()),
            "finalizers": List(Str()),
            "managedFields": AnyValue(),
            "selfLink": Str(),
        },
        required=("name",),
    )


def _annotation_key_problem(k: str) -> str | None:
    p = label_key_problem(k)
    return p.replace("label key", "annotation key") if p else None


def _annotations_size(value, path, errors):
    if isinstance(value, dict):
        size = sum(len(k) + len(v) for k, v in value.items() if isinstance(v, str))
        if size > 256 * 1024:
            errors.append(FieldError(path, f"annotations total {size} bytes: must be at most 262144"))


# ----------------------------------------------------------------------------- NodePool
DISRUPTION = Obj(
    {
        "consolidateAfter": Str(pattern=NILLABLE_DURATION_RE.pattern, pattern_msg=NILLABLE_DURATION_MSG),
        "consolidationPolicy": Str(enum=CONSOLIDATION_POLICIES, default="WhenEmptyOrUnderutilized"),
        "budgets": List(BUDGET, max_items=50, default=[{"nodes": "10%"}]),
    },
    required={"consolidateAfter": "consolidateAfter must be set when disruption is given (Karpenter's CRD defaults it to 0s only when the whole disruption block is omitted)"},
    default={"consolidateAfter": "0s"},
)


def _check_nodepool_spec(spec: dict, path: str, errors: list[FieldError]) -> None:
    if "replicas" in spec:
        limits = spec.get("limits")
        if isinstance(limits, dict) and any(k != "nodes" for k in limits):
            errors.append(FieldError(join(path, "limits"), "only 'limits.nodes' is supported on static NodePools (replicas is set)"))
        if "weight" in spec:
            errors.append(FieldError(join(path, "weight"), "'weight' is not supported on static NodePools (replicas is set)"))


NODEPOOL_TEMPLATE_SPEC = Obj(
    {
        "taints": List(TAINT),
        "startupTaints": List(TAINT),
        "requirements": List(_requirement(allow_nodepool=False), max_items=100),
        "nodeClassRef": NODE_CLASS_REF,
        "terminationGracePeriod": _termination_grace_period(),
        "expireAfter": _expire_after(),
    },
    required=("requirements", "nodeClassRef"),
    checks=[_check_taint_duplicates],
)

NODEPOOL_SPEC = Obj(
    {
        "template": Obj(
            {
                "metadata": Obj(
                    {
                        "labels": Map(Str(max_len=63, checks=[label_value_check]), key_check=_template_label_key, max_props=100),
                        "annotations": Map(Str(), key_check=_annotation_key_problem),
                    }
                ),
                "spec": NODEPOOL_TEMPLATE_SPEC,
            },
            required=("spec",),
        ),
        "disruption": DISRUPTION,
        "limits": Map(OneOf(_quantity(nonneg=True)), key_check=_resource_name_problem),
        "weight": Int(minimum=1, maximum=100),
        "replicas": Int(minimum=0),
    },
    required=("template",),
    checks=[_check_nodepool_spec],
)

# ----------------------------------------------------------------------------- NodeClaim
NODECLAIM_SPEC = Obj(
    {
        "taints": List(TAINT),
        "startupTaints": List(TAINT),
        "requirements": List(_requirement(allow_nodepool=True), max_items=100),
        "resources": Obj({"requests": Map(OneOf(_quantity()), key_check=_resource_name_problem)}),
        "nodeClassRef": NODE_CLASS_REF,
        "terminationGracePeriod": _termination_grace_period(),
        "expireAfter": _expire_after(),
    },
    required=("requirements", "nodeClassRef"),
    checks=[_check_taint_duplicates],
)


# ----------------------------------------------------------------------------- EC2NodeClass
def _tags_check(value, path, errors):
    """Selector tags: non-empty keys and values ('*' selects any value)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "" or v == "":
                errors.append(FieldError(key(path, str(k)), "empty tag keys or values aren't supported"))


def _selector_tags() -> Map:
    return Map(Str(), max_props=20, checks=[_tags_check])


def _exclusive(term: dict, path: str, errors: list, field: str, others: tuple[str, ...], what: str) -> None:
    if field in term:
        clash = [o for o in others if o in term]
        if clash:
            errors.append(FieldError(join(path, field), f"'{field}' is mutually exclusive: it cannot be combined with {', '.join(clash)} in {what}"))


def _at_least_one(term: dict, path: str, errors: list, fields: tuple[str, ...]) -> None:
    if not any(f in term for f in fields):
        errors.append(FieldError(path, f"expected at least one of {', '.join(fields)}, got none"))


def _subnet_term_check(t, path, errors):
    _at_least_one(t, path, errors, ("tags", "id"))
    _exclusive(t, path, errors, "id", ("tags",), "a subnet selector term")


def _sg_term_check(t, path, errors):
    _at_least_one(t, path, errors, ("tags", "id", "name"))
    _exclusive(t, path, errors, "id", ("tags", "name"), "a security group selector term")
    if "id" not in t:
        _exclusive(t, path, errors, "name", ("tags",), "a security group selector term")


def _cr_term_check(t, path, errors):
    _at_least_one(t, path, errors, ("tags", "id", "instanceMatchCriteria"))
    _exclusive(t, path, errors, "id", ("tags", "ownerID", "instanceMatchCriteria"), "a capacity reservation selector term")


def _ami_term_check(t, path, errors):
    # the CRD's exclusivity rules leave ssmParameter out: beside an alias or an id it is accepted and never read
    # (Karpenter's DescribeImageQueries; adapters/aws/amis.py does the same), a warning in api/nodeclass_hints.py
    _at_least_one(t, path, errors, ("tags", "id", "name", "alias", "ssmParameter"))
    _exclusive(t, path, errors, "id", ("alias", "tags", "name", "owner"), "an amiSelectorTerm")
    if "id" not in t:
        _exclusive(t, path, errors, "alias", ("tags", "name", "owner"), "an amiSelectorTerm")


def _alias_check(value, path, errors):
    if not isinstance(value, str) or len(value) > 30:
        return
    if not re.match(r"^[a-zA-Z0-9]+@.+$", value):
        errors.append(FieldError(path, f"'alias' {value!r} is improperly formatted, must match the format 'family@version' (e.g. al2023@latest)"))
        return
    family, version = value.split("@", 1)
    if family not in ALIAS_FAMILIES:
        errors.append(FieldError(path, f"alias family {family!r} is not supported, must be one of: {', '.join(ALIAS_FAMILIES)}"))
    elif family in WINDOWS_ALIASES and version != "latest":
        errors.append(FieldError(path, f"windows families may only specify version 'latest' (got {value!r})"))


def _ami_terms_check(terms, path, errors):
    if isinstance(terms, list) and len(terms) > 1:
        for i, t in enumerate(terms):
            if isinstance(t, dict) and "alias" in t:
                errors.append(FieldError(join(index(path, i), "alias"), "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms (an alias term must be the only term)"))


def _forbidden_tag_key(k: str) -> str | None:
    if k == "":
        return "empty tag keys aren't supported"
    if k in FORBIDDEN_TAG_KEYS:
        return f"tag contains a restricted tag matching {k} (Karpenter sets it)"
    if k.startswith("kubernetes.io/cluster"):
        return "tag contains a restricted tag matching kubernetes.io/cluster/ (Karpenter sets it)"
    return None


def _key_in(allowed: tuple[str, ...], field: str):
    """A Map key check: keys must be one of ``allowed`` (the message lists them)."""
    def check(k: str) -> str | None:
        if k not in allowed:
            return f"valid keys for {field} are {', '.join(allowed)}"
        return None

    return check


def _eviction_threshold(value, path, errors):
    """A percentage or a quantity, as the CRD's pattern says.  That pattern has an empty alternative (``%||``) and so
    lets "" through, but Karpenter's allocatable computation (``resource.MustParse``) and the kubelet both fail on it:
    refused here."""
    if not isinstance(value, str) or _PERCENT_RE.match(value):
        return
    if value == "":
        errors.append(FieldError(path, "invalid eviction threshold '': must be a percentage (e.g. 10%) or a quantity "
                                       "(e.g. 100Mi); Karpenter's CRD pattern lets an empty value through, but its "
                                       "allocatable computation and the kubelet both fail on it"))
        return
    try:
        parse_quantity(value)
    except QuantityError:
        errors.append(FieldError(path, f"invalid eviction threshold {value!r}: must be a percentage (e.g. 10%) or a quantity (e.g. 100Mi)"))


def _go_duration_check(value, path, errors):
    if isinstance(value, str):
        try:
            parse_go_duration(value)
        except DurationError:
            errors.append(FieldError(path, f"invalid duration {value!r}: expected a Go duration such as 30s, 1m30s or 2h"))


def _ip_check(value, path, errors):
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
        except ValueError:
            errors.append(FieldError(path, f"invalid IP address {value!r}"))


def _kubelet_check(k: dict, path: str, errors: list[FieldError]) -> None:
    hi, lo = k.get("imageGCHighThresholdPercent"), k.get("imageGCLowThresholdPercent")
    if isinstance(hi, int) and isinstance(lo, int) and not hi > lo:
        errors.append(FieldError(join(path, "imageGCHighThresholdPercent"), f"imageGCHighThresholdPercent ({hi}) must be greater than imageGCLowThresholdPercent ({lo})"))
    soft, grace = k.get("evictionSoft"), k.get("evictionSoftGracePeriod")
    soft = soft if isinstance(soft, dict) else {}
    grace = grace if isinstance(grace, dict) else {}
    for s in soft:
        if s not in grace:
            errors.append(FieldError(key(join(path, "evictionSoft"), s), f"evictionSoft signal {s!r} has no matching evictionSoftGracePeriod"))
    for s in grace:
        if s not in soft:
            errors.append(FieldError(key(join(path, "evictionSoftGracePeriod"), s), f"evictionSoftGracePeriod signal {s!r} has no matching evictionSoft"))


INT32_MAX = 2**31 - 1
# a CEL expression where Karpenter's NodeClassCEL gate would take one: identifiers or calls, not a quantity's digits
_EXPRESSION_RE = re.compile(r"[A-Za-z_]{2,}\s*\(|\b(vcpus|memory_mib|max_pods|default_enis|ips_per_eni|instance_type)\b")


_MAX_PODS_INT = Int(minimum=0, maximum=INT32_MAX)


def _max_pods(value) -> str | None:
    if isinstance(value, str) and _EXPRESSION_RE.search(value):
        return EXPRESSIONS_NOT_SUPPORTED
    errors: list[FieldError] = []
    _MAX_PODS_INT.walk(value, "", errors)
    return errors[0].message if errors else None


_reserved_quantity = _quantity(nonneg=True, allow_int=False)


def _reserved(value) -> str | None:
    if isinstance(value, str) and _EXPRESSION_RE.search(value):
        return EXPRESSIONS_NOT_SUPPORTED
    return _reserved_quantity(value)


KUBELET = Obj(
    {
        "clusterDNS": List(Str(checks=[_ip_check])),
        "maxPods": OneOf(_max_pods),
        "podsPerCore": Int(minimum=0, maximum=INT32_MAX),
        "systemReserved": Map(OneOf(_reserved), key_check=_key_in(RESERVED_RESOURCES, "systemReserved")),
        "kubeReserved": Map(OneOf(_reserved), key_check=_key_in(RESERVED_RESOURCES, "kubeReserved")),
        "evictionHard": Map(Str(checks=[_eviction_threshold]), key_check=_key_in(EVICTION_SIGNALS, "evictionHard")),
        "evictionSoft": Map(Str(checks=[_eviction_threshold]), key_check=_key_in(EVICTION_SIGNALS, "evictionSoft")),
        "evictionSoftGracePeriod": Map(Str(checks=[_go_duration_check]), key_check=_key_in(EVICTION_SIGNALS, "evictionSoftGracePeriod")),
        "evictionMaxPodGracePeriod": Int(minimum=-(2**31), maximum=INT32_MAX),
        "imageGCHighThresholdPercent": Int(minimum=0, maximum=100),
        "imageGCLowThresholdPercent": Int(minimum=0, maximum=100),
        "cpuCFSQuota": Bool(),
    },
    checks=[_kubelet_check],
    # any other KubeletConfiguration field, by its JSON type (Karpenter v1.15); AL2023 passes them to the kubelet and
    # the other families refuse them (_ec2nodeclass_spec_check)
    passthrough=KUBELET_PASSTHROUGH,
    unknown_message=f"unknown field: not a field of the kubelet's KubeletConfiguration ({KUBELET_VERSION})",
)


def _volume_size_check(value, path, errors):
    if not isinstance(value, str):
        return
    m = _VOLUME_SIZE_RE.fullmatch(value)
    if not m or int(m.group(1)) < 1 or int(m.group(1)) > _VOLUME_SIZE_MAX[m.group(2)]:
        errors.append(FieldError(path, f"invalid volumeSize {value!r}: must be a whole number of Gi, G, Ti or T, from 1 up to 59000Gi / 64000G / 58Ti / 64T"))
    elif not _VOLUME_SIZE_CRD_RE.fullmatch(value):
        n, unit = int(m.group(1)), m.group(2)
        why, spelling = ["no leading zero"] if m.group(1).startswith("0") else [], f"{n}{unit}"
        if not _VOLUME_SIZE_CRD_RE.fullmatch(spelling):   # a Ti size the pattern skips (all Gi, G, T sizes match)
            why, spelling = why + ["Ti only 1-17, 20-27, 30-37, 40-47 or 50-58"], f"{n * 1024}Gi"
        errors.append(FieldError(path, f"invalid volumeSize {value!r}: Karpenter's CRD pattern refuses it "
                                       f"({'; '.join(why)}); write {spelling}"))


def _ebs_check(ebs: dict, path: str, errors: list[FieldError]) -> None:
    if "snapshotID" not in ebs and "volumeSize" not in ebs:
        errors.append(FieldError(path, "snapshotID or volumeSize must be defined"))
    if "volumeInitializationRate" in ebs and not ebs.get("snapshotID"):
        errors.append(FieldError(join(path, "volumeInitializationRate"), "snapshotID must be set when volumeInitializationRate is set"))


EBS = Obj(
    {
        "deleteOnTermination": Bool(),
        "encrypted": Bool(),
        "iops": Int(minimum=0),
        "kmsKeyID": Str(),
        "snapshotID": Str(),
        "throughput": Int(minimum=0),
        "volumeInitializationRate": Int(minimum=100, maximum=300),
        "volumeSize": Str(checks=[_volume_size_check]),
        "volumeType": Str(enum=VOLUME_TYPES),
    },
    checks=[_ebs_check],
)


def _bdm_list_check(items, path, errors):
    if not isinstance(items, list):
        return
    roots = [i for i, b in enumerate(items) if isinstance(b, dict) and b.get("rootVolume") is True]
    for i in roots[1:]:
        errors.append(FieldError(join(index(path, i), "rootVolume"), f"must have only one blockDeviceMappings with rootVolume (already set at {index(path, roots[0])})"))


def _placement_group_check(pg, path, errors):
    n = sum(1 for f in ("name", "id") if f in pg)
    if n != 1:
        errors.append(FieldError(path, "must specify exactly one of name or id"))


def _ec2nodeclass_spec_check(spec: dict, path: str, errors: list[FieldError]) -> None:
    has_role, has_profile = "role" in spec, "instanceProfile" in spec
    if has_role and has_profile:
        errors.append(FieldError(join(path, "instanceProfile"), "must specify exactly one of ['role', 'instanceProfile'], not both"))
    elif not has_role and not has_profile:
        errors.append(FieldError(join(path, "role"), "Required value: must specify exactly one of ['role', 'instanceProfile']"))
    terms = spec.get("amiSelectorTerms")
    alias = None
    if isinstance(terms, list):
        for t in terms:
            if isinstance(t, dict) and isinstance(t.get("alias"), str):
                alias = t["alias"]
                break
    fam = spec.get("amiFamily")
    if alias is None:
        if "amiFamily" not in spec:
            errors.append(FieldError(join(path, "amiFamily"), "Required value: must specify amiFamily if amiSelectorTerms does not contain an alias"))
    elif fam in AMI_FAMILIES:  # an unknown family was already reported by the enum
        alias_family = ALIAS_FAMILIES.get(alias.split("@", 1)[0])
        if alias_family and fam not in (alias_family, "Custom"):
            errors.append(FieldError(join(path, "amiFamily"), f"if set, amiFamily must be '{alias_family}' or 'Custom' when using the alias {alias!r} (got {fam!r})"))
    # kubelet fields the AMI family would drop (Karpenter's UnsupportedKubeletConfiguration)
    family = fam if fam in AMI_FAMILIES else (ALIAS_FAMILIES.get(alias.split("@", 1)[0]) if alias else None)
    kubelet = spec.get("kubelet")
    if isinstance(kubelet, dict):
        for field, message in family_problems(family, kubelet):
            errors.append(FieldError(join(join(path, "kubelet"), field), message))


EC2NODECLASS_SPEC = Obj(
    {
        "subnetSelectorTerms": List(
            Obj({"tags": _selector_tags(), "id": Str(pattern=r"^subnet-[0-9a-z]+$", pattern_msg="must look like subnet-0123abcd")}, checks=[_subnet_term_check]),
            min_items=1,
            max_items=30,
        ),
        "securityGroupSelectorTerms": List(
            Obj(
                {"tags": _selector_tags(), "id": Str(pattern=r"^sg-[0-9a-z]+$", pattern_msg="must look like sg-0123abcd"), "name": Str(not_empty=True)},
                checks=[_sg_term_check],
            ),
            min_items=1,
            max_items=30,
        ),
        "capacityReservationSelectorTerms": List(
            Obj(
                {
                    "tags": _selector_tags(),
                    "id": Str(pattern=r"^cr-[0-9a-z]+$", pattern_msg="must look like cr-0123abcd"),
                    "ownerID": Str(pattern=r"^[0-9]{12}$", pattern_msg="must be a 12-digit AWS account ID"),
                    "instanceMatchCriteria": Str(enum=("open", "targeted")),
                },
                checks=[_cr_term_check],
            ),
            max_items=30,
        ),
        "placementGroupSelector": Obj(
            {"name": Str(not_empty=True), "id": Str(pattern=r"^pg-[0-9a-z]+$", pattern_msg="must look like pg-0123abcd")},
            checks=[_placement_group_check],
        ),
        "associatePublicIPAddress": Bool(),
        "ipPrefixCount": Int(minimum=0, maximum=INT32_MAX),
        "amiSelectorTerms": List(
            Obj(
                {
                    "alias": Str(max_len=30, checks=[_alias_check]),
                    "tags": _selector_tags(),
                    "id": Str(pattern=r"^ami-[0-9a-z]+$", pattern_msg="must look like ami-0123abcd"),
                    "name": Str(not_empty=True),
                    "owner": Str(not_empty=True),
                    "ssmParameter": Str(not_empty=True),
                },
                checks=[_ami_term_check],
            ),
            min_items=1,
            max_items=30,
            checks=[_ami_terms_check],
        ),
        "amiFamily": Str(enum=AMI_FAMILIES),
        "userData": Str(),
        "role": Str(not_empty=True),
        "instanceProfile": Str(not_empty=True),
        "tags": Map(Str(), key_check=_forbidden_tag_key),
        "kubelet": KUBELET,
        "blockDeviceMappings": List(
            Obj({"deviceName": Str(not_empty=True), "ebs": EBS, "rootVolume": Bool()}),
            max_items=50,
            checks=[_bdm_list_check],
        ),
        "instanceStorePolicy": Str(enum=("RAID0",)),
        "detailedMonitoring": Bool(),
        "metadataOptions": Obj(
            {
                "httpEndpoint": Str(enum=("enabled", "disabled"), default="enabled"),
                "httpProtocolIPv6": Str(enum=("enabled", "disabled"), default="disabled"),
                "httpPutResponseHopLimit": Int(minimum=1, maximum=64, default=1),
                "httpTokens": Str(enum=("required", "optional"), default="required"),
            },
            default={},
        ),
        "context": Str(),
        # fields of Karpenter's EC2NodeClass karpenter-lambda does not implement: refused, never ignored
        **{f: Refused(refusal("EC2NodeClass", f"spec.{f}")) for f in ("networkInterfaces", "cpuOptions", "connectionTracking", "enclaveOptions")},
    },
    required={
        "subnetSelectorTerms": "at least one subnet selector term (tags or id) is needed",
        "securityGroupSelectorTerms": "at least one security group selector term (tags, id or name) is needed",
        "amiSelectorTerms": "at least one AMI selector term is needed, e.g. alias: al2023@latest",
    },
    checks=[_ec2nodeclass_spec_check],
)


# ----------------------------------------------------------------------------- top level
def _top(spec: Node) -> Obj:
    return Obj(
        {"apiVersion": Str(), "kind": Str(), "metadata": _metadata(), "spec": spec, "status": AnyValue()},
        required=("metadata", "spec"),
    )


SCHEMAS: dict[str, Obj] = {
    "NodePool": _top(NODEPOOL_SPEC),
    "EC2NodeClass": _top(EC2NODECLASS_SPEC),
    "NodeClaim": _top(NODECLAIM_SPEC),
}

# karpenter-lambda's own kind: its spec schema lives with its type (offpeak.py builds on validators.py).
SCHEMAS["OffPeakSchedule"] = _top(_offpeak_spec_schema())
# Karpenter's NodeOverlay (karpenter.sh/v1alpha1): the schema in overlay.py, with the NodePool requirement rules
SCHEMAS["NodeOverlay"] = _top(_overlay_spec_schema(_check_requirement_factory(allow_nodepool=True)))


def validate_and_default(kind: str, doc: dict) -> tuple[dict, list[FieldError]]:
    """Return (a NEW dict with Karpenter's CRD defaults applied, every FieldError found).

    ``kind`` is NodePool, EC2NodeClass, NodeClaim, NodeOverlay or OffPeakSchedule.  The input is never modified.
    """
    schema = SCHEMAS.get(kind)
    if schema is None:
        return copy.deepcopy(doc) if isinstance(doc, dict) else {}, [
            FieldError("kind", f"unsupported kind {kind!r}: expected one of {', '.join(SCHEMAS)}")
        ]
    if not isinstance(doc, dict):
        return {}, [FieldError("", f"expected a mapping (a Kubernetes object), got {type(doc).__name__}")]
    errors: list[FieldError] = []
    out = schema.walk(doc, "", errors)
    return out, errors


def apply_defaults(kind: str, doc: dict) -> dict:
    """Only the defaulting half of :func:`validate_and_default` (problems ignored)."""
    return validate_and_default(kind, doc)[0]
