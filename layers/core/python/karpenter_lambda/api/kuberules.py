"""The API server's checks of a pod spec that its OpenAPI schema cannot express (pure).

The published schemas type a quantity as "a string or a number" and leave most enums open (a toleration's
``operator``, a spread constraint's ``whenUnsatisfiable``, a selector's ``operator`` are plain strings there); the
API server's validation (``pkg/apis/core/validation``) refuses what these functions refuse, with its wording:
``Unsupported value: "Exist": supported values: "Equal", "Exists"``, ``Invalid value: ...``, ``Required value``.
Only the rules that change where a pod may go or what it asks of a node are here: resources, tolerations, node
and pod (anti-)affinity, topology spread, label selectors.  The other kinds' rules (PDB, claims, volumes, storage
classes, workload selectors) are in :mod:`.kuberules_objects`.
"""

from __future__ import annotations

import json

from .errors import FieldError
from .quantity import parse_quantity, quantity_problem
from .selectors import OPERATORS as SELECTOR_OPERATORS
from .text import one_edit
from .validators import label_key_problem, label_value_problem

Errors = list[FieldError]


def quote(values) -> str:
    return ", ".join(json.dumps(v) for v in values)


def unsupported(path: str, value, allowed) -> FieldError:
    return FieldError(path, f"Unsupported value: {json.dumps(value)}: supported values: {quote(allowed)}")


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def key_text(key) -> str:
    """A mapping key as the API server reads it: YAML's ``1:`` or ``true:`` key becomes the JSON string ``"1"`` /
    ``"true"`` on the way (``sigs.k8s.io/yaml``)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _str_field(obj: dict, name: str) -> str:
    """The field when it is a string (the schema check reports any other type)."""
    v = obj.get(name)
    return v if isinstance(v, str) else ""


# -- quantities -------------------------------------------------------------------------------------------------
def resource_list(value, path: str, errors: Errors, nonneg: bool = True) -> dict:
    """Check a ResourceList (``{cpu: 500m}``): each value a quantity, not negative; returns the parsed ones."""
    out = {}
    for name, q in _dict(value).items():
        name = key_text(name)
        where = f"{path}[{name}]" if "/" in name or "." in name else f"{path}.{name}"
        problem = quantity_problem(q)
        if problem:
            errors.append(FieldError(where, f"Invalid value: {json.dumps(q)}: {problem}"))
            continue
        parsed = parse_quantity(q)
        if nonneg and parsed < 0:
            errors.append(FieldError(where, f"Invalid value: {json.dumps(q)}: must be greater than or equal to 0"))
            continue
        out[name] = (parsed, q)
    return out


#: the resource names a container may ask for without a domain (``helper.IsStandardContainerResourceName``), and
#: the prefix of the huge page sizes (``hugepages-2Mi``)
CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"


def _native(name: str) -> bool:
    """A resource of Kubernetes itself: no domain, or a ``kubernetes.io`` one (``helper.IsNativeResource``)."""
    return "/" not in name or "kubernetes.io/" in name


def _overcommit_allowed(name: str) -> bool:
    """May a request be below its limit (``helper.IsOvercommitAllowed``)? Native resources but huge pages."""
    return _native(name) and not name.startswith(HUGEPAGES_PREFIX)


def container_resource_name_problem(name: str) -> str | None:
    """The API server's check of a container's resource name (``validateContainerResourceName``): a name without a
    domain must be a standard one (``memroy`` is refused, not read as a resource nothing offers), a name with one a
    qualified name, and an extended one (another domain) must not start with ``requests.``."""
    if "/" not in name:
        if name in CONTAINER_RESOURCES or name.startswith(HUGEPAGES_PREFIX):
            return None
        hint = next((f" (did you mean {c}?)" for c in CONTAINER_RESOURCES if one_edit(name, c)), "")
        return (f"Invalid value: {json.dumps(name)}: must be a standard resource for containers "
                f"({quote(CONTAINER_RESOURCES)} or hugepages-<size>, or a name with a domain such as "
                f"nvidia.com/gpu){hint}")
    if label_key_problem(name):
        return f"Invalid value: {json.dumps(name)}: {label_key_problem(name)}"
    if not _native(name) and name.startswith("requests."):
        return f"Invalid value: {json.dumps(name)}: doesn't follow extended resource name standard"
    return None


def resources(value, path: str, errors: Errors) -> None:
    """A container's ``resources`` as the API server checks them (``ValidateResourceRequirements``): resource names,
    quantities, each request at most its limit, and a resource that cannot be overcommitted (an extended resource
    such as ``nvidia.com/gpu``, huge pages) requested only with an equal limit."""
    res = _dict(value)
    for part in ("limits", "requests"):
        for name in map(key_text, _dict(res.get(part))):
            problem = container_resource_name_problem(name)
            if problem:
                errors.append(FieldError(f"{path}.{part}[{name}]", problem))
    requests = resource_list(res.get("requests"), f"{path}.requests", errors)
    limits = resource_list(res.get("limits"), f"{path}.limits", errors)
    for name, (req, raw) in requests.items():
        where = f"{path}.requests[{name}]" if "/" in name or "." in name else f"{path}.requests.{name}"
        if name not in limits:
            if not _overcommit_allowed(name):
                errors.append(FieldError(f"{path}.limits[{name}]", "Required value: Limit must be set for non "
                                                                    "overcommitable resources"))
        elif req != limits[name][0] and not _overcommit_allowed(name):
            errors.append(FieldError(where, f"Invalid value: {json.dumps(raw)}: must be equal to {name} limit of "
                                            f"{limits[name][1]}"))
        elif req > limits[name][0]:
            errors.append(FieldError(where, f"Invalid value: {json.dumps(raw)}: must be less than or equal to "
                                            f"{name} limit of {limits[name][1]}"))


def overhead(value, path: str, errors: Errors) -> None:
    """A pod's ``spec.overhead`` or a RuntimeClass's ``overhead.podFixed``: the API server checks it as a container's
    limits (``validateOverhead``: resource names, quantities not negative); named here where it is written."""
    for name in map(key_text, _dict(value)):
        problem = container_resource_name_problem(name)
        if problem:
            errors.append(FieldError(f"{path}[{name}]", problem))
    resource_list(value, path, errors)


# -- selectors --------------------------------------------------------------------------------------------------
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _values_rule(op: str, values: list, path: str, errors: Errors, numeric_ops: bool) -> None:
    if op in ("In", "NotIn") and not values:
        errors.append(FieldError(f"{path}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist") and values:
        errors.append(FieldError(f"{path}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif numeric_ops and op in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(FieldError(f"{path}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"))
        elif not (isinstance(values[0], str) and values[0].lstrip("-").isdigit()):
            errors.append(FieldError(f"{path}.values[0]", f"Invalid value: {json.dumps(values[0])}: must be an integer"))


def label_key(key, path: str, errors: Errors) -> None:
    problem = label_key_problem(key) if isinstance(key, str) else None
    if problem:
        errors.append(FieldError(path, problem))


def labels(value, path: str, errors: Errors) -> None:
    """Label keys and values (metadata.labels, a selector's matchLabels)."""
    for k, v in _dict(value).items():
        k = key_text(k)
        where = f"{path}[{k}]" if "/" in k or "." in k else f"{path}.{k}"
        label_key(k, where, errors)
        problem = label_value_problem(v) if isinstance(v, str) else None
        if problem:
            errors.append(FieldError(where, problem))


def label_selector(value, path: str, errors: Errors) -> None:
    """A metav1.LabelSelector: matchLabels syntax, matchExpressions operators and values."""
    sel = _dict(value)
    labels(sel.get("matchLabels"), f"{path}.matchLabels", errors)
    for i, expr in enumerate(_list(sel.get("matchExpressions"))):
        where = f"{path}.matchExpressions[{i}]"
        expr = _dict(expr)
        op = _str_field(expr, "operator")
        label_key(expr.get("key"), f"{where}.key", errors)
        if op and op not in SELECTOR_OPERATORS:
            errors.append(unsupported(f"{where}.operator", op, SELECTOR_OPERATORS))
        else:
            _values_rule(op, _list(expr.get("values")), where, errors, numeric_ops=False)


def node_selector_term(term, path: str, errors: Errors) -> None:
    for i, expr in enumerate(_list(_dict(term).get("matchExpressions"))):
        where = f"{path}.matchExpressions[{i}]"
        expr = _dict(expr)
        op = _str_field(expr, "operator")
        label_key(expr.get("key"), f"{where}.key", errors)
        if op and op not in NODE_SELECTOR_OPERATORS:
            errors.append(unsupported(f"{where}.operator", op, NODE_SELECTOR_OPERATORS))
        else:
            _values_rule(op, _list(expr.get("values")), where, errors, numeric_ops=True)
    for i, expr in enumerate(_list(_dict(term).get("matchFields"))):
        where = f"{path}.matchFields[{i}]"
        expr = _dict(expr)
        if expr.get("key") != "metadata.name":
            errors.append(unsupported(f"{where}.key", expr.get("key"), ["metadata.name"]))
        op = _str_field(expr, "operator")
        if op and op not in ("In", "NotIn"):
            errors.append(unsupported(f"{where}.operator", op, ("In", "NotIn")))
        elif op and len(_list(expr.get("values"))) != 1:
            errors.append(FieldError(f"{where}.values", "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))


def node_selector(value, path: str, errors: Errors) -> None:
    """A core/v1 NodeSelector (required node affinity, a PV's node affinity): at least one term, each checked."""
    terms = _list(_dict(value).get("nodeSelectorTerms"))
    if isinstance(value, dict) and not terms:
        errors.append(FieldError(f"{path}.nodeSelectorTerms", "Required value: must have at least one node selector term"))
    for i, term in enumerate(terms):
        node_selector_term(term, f"{path}.nodeSelectorTerms[{i}]", errors)


def _weight(term: dict, path: str, errors: Errors) -> None:
    w = term.get("weight")
    if isinstance(w, int) and not isinstance(w, bool) and not 1 <= w <= 100:
        errors.append(FieldError(f"{path}.weight", f"Invalid value: {w}: must be in the range 1-100"))


def _pod_affinity_term(term, path: str, errors: Errors) -> None:
    term = _dict(term)
    if not _str_field(term, "topologyKey"):
        errors.append(FieldError(f"{path}.topologyKey", "Required value: can not be empty"))
    else:
        label_key(term["topologyKey"], f"{path}.topologyKey", errors)
    label_selector(term.get("labelSelector"), f"{path}.labelSelector", errors)
    label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector", errors)


def affinity(value, path: str, errors: Errors) -> None:
    aff = _dict(value)
    node = _dict(aff.get("nodeAffinity"))
    node_selector(node.get("requiredDuringSchedulingIgnoredDuringExecution"),
                  f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", errors)
    for i, pref in enumerate(_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        where = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        _weight(_dict(pref), where, errors)
        node_selector_term(_dict(pref).get("preference"), f"{where}.preference", errors)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = _dict(aff.get(kind))
        for i, term in enumerate(_list(pod.get("requiredDuringSchedulingIgnoredDuringExecution"))):
            _pod_affinity_term(term, f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", errors)
        for i, pref in enumerate(_list(pod.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            where = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            _weight(_dict(pref), where, errors)
            _pod_affinity_term(_dict(pref).get("podAffinityTerm"), f"{where}.podAffinityTerm", errors)


# -- tolerations, spread ----------------------------------------------------------------------------------------
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")   # also a NodePool taint's (api/validation.py)


def tolerations(value, path: str, errors: Errors) -> None:
    for i, t in enumerate(_list(value)):
        where, t = f"{path}[{i}]", _dict(t)
        op, effect = _str_field(t, "operator"), _str_field(t, "effect")
        if op and op not in TOLERATION_OPERATORS:
            errors.append(unsupported(f"{where}.operator", op, TOLERATION_OPERATORS))
        elif not t.get("key") and op != "Exists":
            errors.append(FieldError(f"{where}.operator", f"Invalid value: {json.dumps(op)}: operator must be Exists "
                                                          "when `key` is empty, which means \"match all values and all keys\""))
        elif op == "Exists" and t.get("value"):
            errors.append(FieldError(f"{where}.operator", "Invalid value: \"Exists\": value must be empty when `operator` is 'Exists'"))
        if t.get("key"):
            label_key(t["key"], f"{where}.key", errors)
        if effect and effect not in TAINT_EFFECTS:
            errors.append(unsupported(f"{where}.effect", effect, TAINT_EFFECTS))
        elif t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(FieldError(f"{where}.effect", f"Invalid value: {json.dumps(effect)}: effect must be 'NoExecute' "
                                                        "when `tolerationSeconds` is set"))


WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")


def topology_spread(value, path: str, errors: Errors) -> None:
    for i, c in enumerate(_list(value)):
        where, c = f"{path}[{i}]", _dict(c)
        skew = c.get("maxSkew")
        if isinstance(skew, int) and not isinstance(skew, bool) and skew <= 0:
            errors.append(FieldError(f"{where}.maxSkew", f"Invalid value: {skew}: must be greater than zero"))
        if "topologyKey" in c and not _str_field(c, "topologyKey"):
            errors.append(FieldError(f"{where}.topologyKey", "Required value: can not be empty"))
        when = _str_field(c, "whenUnsatisfiable")
        if when and when not in WHEN_UNSATISFIABLE:
            errors.append(unsupported(f"{where}.whenUnsatisfiable", when, WHEN_UNSATISFIABLE))
        min_domains = c.get("minDomains")
        if isinstance(min_domains, int) and not isinstance(min_domains, bool):
            if min_domains <= 0:
                errors.append(FieldError(f"{where}.minDomains", f"Invalid value: {min_domains}: must be greater than zero"))
            elif when and when != "DoNotSchedule":
                errors.append(FieldError(f"{where}.minDomains", f"Invalid value: {min_domains}: can only use minDomains "
                                                                "if whenUnsatisfiable=DoNotSchedule"))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = _str_field(c, policy)
            if v and v not in INCLUSION_POLICIES:
                errors.append(unsupported(f"{where}.{policy}", v, INCLUSION_POLICIES))
        label_selector(c.get("labelSelector"), f"{where}.labelSelector", errors)


# -- ports ------------------------------------------------------------------------------------------------------
PROTOCOLS = ("SCTP", "TCP", "UDP")


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def ports(value, path: str, host_network: bool, errors: Errors) -> None:
    """A container's ``ports`` (``validateContainerPorts``, ``validateHostNetwork``): port numbers 1-65535 (a
    ``hostPort`` of 0 is unset), a known protocol, and with ``hostNetwork: true`` a ``hostPort`` equal to the
    ``containerPort`` when set (the container listens on the node's own port: the API server defaults an unset one
    to it, :func:`.workloads.default_host_network_ports`)."""
    for j, port in enumerate(_list(value)):
        where, port = f"{path}[{j}]", _dict(port)
        container_port, host_port = port.get("containerPort"), port.get("hostPort")
        if _int(container_port) and container_port == 0:
            errors.append(FieldError(f"{where}.containerPort", "Required value"))
        elif _int(container_port) and not 1 <= container_port <= 65535:
            errors.append(FieldError(f"{where}.containerPort", f"Invalid value: {container_port}: must be between 1 and "
                                                               "65535, inclusive"))
        if _int(host_port) and host_port != 0 and not 1 <= host_port <= 65535:
            errors.append(FieldError(f"{where}.hostPort", f"Invalid value: {host_port}: must be between 1 and 65535, "
                                                          "inclusive"))
        protocol = _str_field(port, "protocol")
        if protocol and protocol not in PROTOCOLS:
            errors.append(unsupported(f"{where}.protocol", protocol, PROTOCOLS))
        if host_network and _int(host_port) and _int(container_port) and host_port not in (0, container_port):
            errors.append(FieldError(f"{where}.containerPort", f"Invalid value: {container_port}: must match `hostPort` "
                                                               "when `hostNetwork` is true"))


# -- the pod spec -----------------------------------------------------------------------------------------------
RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def pod_spec(value, path: str, errors: Errors, restart_policies: tuple[str, ...] = RESTART_POLICIES) -> None:
    """Every rule above on one pod spec (``path`` is where it sits: ``spec``, ``spec.template.spec``), which must have
    a container (``validateContainers``: a pod without ``spec``, with ``spec:`` empty or ``containers: []`` is refused
    with ``spec.containers: Required value``)."""
    spec = _dict(value)
    if not spec.get("containers"):
        errors.append(FieldError(f"{path}.containers", "Required value"))
    for group in ("initContainers", "containers"):
        for i, c in enumerate(_list(spec.get(group))):
            where, c = f"{path}.{group}[{i}]", _dict(c)
            resources(c.get("resources"), f"{where}.resources", errors)
            ports(c.get("ports"), f"{where}.ports", spec.get("hostNetwork") is True, errors)
            pull = _str_field(c, "imagePullPolicy")
            if pull and pull not in PULL_POLICIES:
                errors.append(unsupported(f"{where}.imagePullPolicy", pull, PULL_POLICIES))
    overhead(spec.get("overhead"), f"{path}.overhead", errors)
    restart = _str_field(spec, "restartPolicy")
    if restart and restart not in restart_policies:
        errors.append(unsupported(f"{path}.restartPolicy", restart, restart_policies))
    labels(spec.get("nodeSelector"), f"{path}.nodeSelector", errors)
    affinity(spec.get("affinity"), f"{path}.affinity", errors)
    tolerations(spec.get("tolerations"), f"{path}.tolerations", errors)
    topology_spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints", errors)
