"""The API server's checks of whole objects that their OpenAPI schema cannot express (pure).

Per kind: a workload's selector must select its pod template (else its controller could never count its pods),
replica counts are not negative, the pod spec follows :mod:`.kuberules`; a PodDisruptionBudget sets exactly one of
``minAvailable`` / ``maxUnavailable`` (each an integer >= 0 or a percentage); claims, volumes and storage classes
use their enums and quantities.  :func:`rule_errors` is the entry point; :func:`.kubeschema.schema_errors` checks the
schema itself, and :func:`kube_errors` runs both.
"""

from __future__ import annotations

import json
import re

from . import kuberules as R
from .errors import FieldError
from .kubeschema import KUBERNETES_VERSION, schema_errors
from .kuberules_volumes import volume_errors
from .selectors import OPERATORS as SELECTOR_OPERATORS, Selector
from .validators import DNS1123_SUBDOMAIN_RE

Errors = list[FieldError]

#: where each kind keeps its pod spec
POD_SPEC_PATHS = {
    "Pod": "spec",
    "Deployment": "spec.template.spec",
    "ReplicaSet": "spec.template.spec",
    "StatefulSet": "spec.template.spec",
    "DaemonSet": "spec.template.spec",
    "ReplicationController": "spec.template.spec",
    "Job": "spec.template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
    "PodTemplate": "template.spec",
}
_SELECTED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
INT32_MAX = 2**31 - 1   # replicas, parallelism, completions, backoffLimit are int32 fields
_COUNTS = {"Deployment": ("spec.replicas",), "ReplicaSet": ("spec.replicas",), "StatefulSet": ("spec.replicas",),
           "Job": ("spec.parallelism", "spec.completions", "spec.backoffLimit"),
           "CronJob": ("spec.jobTemplate.spec.parallelism", "spec.jobTemplate.spec.completions")}


def get(doc, path: str):
    cur = doc
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


#: the built-in kinds that are not namespaced (the API server ignores a ``metadata.namespace`` they carry)
CLUSTER_SCOPED = frozenset((
    "Namespace", "Node", "PersistentVolume", "ComponentStatus", "StorageClass", "CSIDriver", "CSINode",
    "VolumeAttachment", "VolumeAttributesClass", "RuntimeClass", "PriorityClass", "ClusterRole", "ClusterRoleBinding",
    "CustomResourceDefinition", "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding", "CertificateSigningRequest", "ClusterTrustBundle", "IngressClass", "FlowSchema",
    "PriorityLevelConfiguration", "IPAddress", "ServiceCIDR", "StorageVersion", "StorageVersionMigration",
    "DeviceClass", "ResourceSlice", "DeviceTaintRule", "TokenReview", "SubjectAccessReview",
    "SelfSubjectAccessReview", "SelfSubjectRulesReview", "SelfSubjectReview"))
#: kinds the API server never stores (requests, answers, lists): no name of their own is required
_NOT_STORED = frozenset(("Status", "DeleteOptions", "WatchEvent", "APIGroup", "APIGroupList", "APIResourceList",
                         "APIVersions", "TokenRequest", "Eviction", "Binding", "Scale", "TokenReview",
                         "SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview",
                         "SelfSubjectReview", "LocalSubjectAccessReview"))
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                     "start and end with an alphanumeric character")
DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                     "alphabetic character, and end with an alphanumeric character")
DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                         "and must start and end with an alphanumeric character")


def _dns_label_problem(value: str, pattern=_DNS1123_LABEL, message: str = DNS1123_LABEL_MSG) -> str | None:
    if len(value) > 63:
        return f"Invalid value: {json.dumps(value)}: must be no more than 63 characters"
    if not pattern.match(value):
        return f"Invalid value: {json.dumps(value)}: {message}"
    return None


def _name_problem(kind: str, name: str) -> str | None:
    """The API server's rule for the name of a ``kind`` (``NameIsDNSSubdomain`` for most; a Namespace's is a DNS-1123
    label, a Service's a DNS-1035 label, RBAC objects' a path segment such as ``system:controller:x``)."""
    if kind == "Namespace":
        return _dns_label_problem(name)
    if kind == "Service":
        return _dns_label_problem(name, _DNS1035_LABEL, DNS1035_LABEL_MSG)
    if kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "FlowSchema", "PriorityLevelConfiguration"):
        if name in (".", ".."):
            return f"Invalid value: {json.dumps(name)}: may not be '{name}'"
        bad = next((c for c in ("/", "%") if c in name), None)
        return f"Invalid value: {json.dumps(name)}: may not contain '{bad}'" if bad else None
    if len(name) > 253:
        return f"Invalid value: {json.dumps(name)}: must be no more than 253 characters"
    if not DNS1123_SUBDOMAIN_RE.match(name):
        return f"Invalid value: {json.dumps(name)}: {DNS1123_SUBDOMAIN_MSG}"
    return None


def _metadata(doc: dict, errors: Errors) -> None:
    """``ValidateObjectMeta``: a name (or a ``generateName``) of the kind's syntax, a namespaced kind's namespace a
    DNS-1123 label, label syntax."""
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else ""
    meta = R._dict(doc.get("metadata"))
    name = meta.get("name")
    stored = kind not in _NOT_STORED and not (kind.endswith("List") and "items" in doc)
    if stored and (name is None or name == "") and not meta.get("generateName"):
        errors.append(FieldError("metadata.name", "Required value: name or generateName is required"))
    elif isinstance(name, str) and name:
        problem = _name_problem(kind, name)
        if problem:
            errors.append(FieldError("metadata.name", problem))
    namespace = meta.get("namespace")
    if stored and kind not in CLUSTER_SCOPED and isinstance(namespace, str) and namespace:
        problem = _dns_label_problem(namespace)
        if problem:
            errors.append(FieldError("metadata.namespace", problem))
    R.labels(meta.get("labels"), "metadata.labels", errors)


def _workload(doc: dict, kind: str, errors: Errors) -> None:
    for path in _COUNTS.get(kind, ()):
        n = get(doc, path)
        if isinstance(n, int) and not isinstance(n, bool) and n < 0:
            errors.append(FieldError(path, f"Invalid value: {n}: must be greater than or equal to 0"))
        elif isinstance(n, int) and not isinstance(n, bool) and n > INT32_MAX:
            errors.append(FieldError(path, f"Invalid value: {n}: must fit in a 32-bit integer (at most {INT32_MAX}): "
                                           "the API server cannot decode it"))
    if kind in _SELECTED_KINDS:
        selector = get(doc, "spec.selector")
        if isinstance(selector, dict):
            before = len(errors)
            R.label_selector(selector, "spec.selector", errors)
            if not selector.get("matchLabels") and not selector.get("matchExpressions"):
                errors.append(FieldError("spec.selector", "Invalid value: {}: empty selector is invalid for deployment"
                                         if kind == "Deployment" else "Required value: a non-empty selector"))
            elif len(errors) == before and _well_formed(selector):
                template_labels = {R.key_text(k): v for k, v in R._dict(get(doc, "spec.template.metadata.labels")).items()}
                # (a label value that is not a string is the schema's error: nothing to match)
                read = {**selector, "matchLabels": {R.key_text(k): v for k, v in R._dict(selector.get("matchLabels")).items()}}
                if all(isinstance(v, str) for v in template_labels.values()) and not Selector(read).matches(template_labels):
                    errors.append(FieldError("spec.template.metadata.labels",
                                             f"Invalid value: {json.dumps(template_labels, sort_keys=True)}: `selector` does not "
                                             "match template `labels`"))
    if kind in POD_SPEC_PATHS:
        if kind != "Pod":   # the template's labels (a Pod's own are its metadata's)
            template = POD_SPEC_PATHS[kind].rsplit(".", 1)[0]
            R.labels(get(doc, f"{template}.metadata.labels"), f"{template}.metadata.labels", errors)
        restart = ("OnFailure", "Never") if kind in ("Job", "CronJob") else ("Always",) if kind in _SELECTED_KINDS else R.RESTART_POLICIES
        R.pod_spec(get(doc, POD_SPEC_PATHS[kind]), POD_SPEC_PATHS[kind], errors, restart)
        _volumes(doc, kind, errors)
    if kind == "StatefulSet":
        _claim_templates(doc, errors)


def _well_formed(selector: dict) -> bool:
    """A label selector of the shape :class:`.selectors.Selector` reads (the schema and :func:`.kuberules.label_selector`
    report any other shape: a ``matchLabels: app=web`` string, an expression without a key or an operator)."""
    labels, exprs = selector.get("matchLabels"), selector.get("matchExpressions")
    if not (labels is None or isinstance(labels, dict)) or not (exprs is None or isinstance(exprs, list)):
        return False
    return all(isinstance(e, dict) and isinstance(e.get("key"), str) and e.get("operator") in SELECTOR_OPERATORS
               and isinstance(e.get("values") or [], list) and all(isinstance(v, str) for v in e.get("values") or [])
               for e in exprs or ())


def _volumes(doc: dict, kind: str, errors: Errors) -> None:
    """The pod spec's volumes and mounts (:mod:`.kuberules_volumes`); a StatefulSet's pods also get its claim
    templates' volumes, and the API server refuses its pods rather than the StatefulSet (the message says so)."""
    templates = tuple(t["metadata"]["name"] for t in R._list(get(doc, "spec.volumeClaimTemplates"))
                      if isinstance(t, dict) and isinstance(t.get("metadata"), dict)
                      and isinstance(t["metadata"].get("name"), str)) if kind == "StatefulSet" else ()
    found = volume_errors(R._dict(get(doc, POD_SPEC_PATHS[kind])), POD_SPEC_PATHS[kind], templates)
    if kind == "StatefulSet":
        found = [FieldError(e.path, f"{e.message} (the API server stores the StatefulSet but refuses each pod made "
                                    "from it: they would never start)") for e in found]
    errors.extend(found)


_PERCENT = re.compile(r"^[0-9]+%$")


def _int_or_percent(value, path: str, errors: Errors) -> None:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            errors.append(FieldError(path, f"Invalid value: {value}: must be greater than or equal to 0"))
    elif isinstance(value, str):
        if not _PERCENT.match(value):
            errors.append(FieldError(path, f"Invalid value: {json.dumps(value)}: a valid percent string must be a numeric "
                                           "string followed by an ending '%' (e.g. '1%',  or '93%')"))
        elif int(value[:-1]) > 100:
            errors.append(FieldError(path, f"Invalid value: {json.dumps(value)}: must not be greater than 100%"))


UNHEALTHY_POD_EVICTION_POLICIES = ("IfHealthyBudget", "AlwaysAllow")


def _pdb(doc: dict, errors: Errors) -> None:
    spec = R._dict(doc.get("spec"))
    if "minAvailable" in spec and "maxUnavailable" in spec:
        errors.append(FieldError("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set"))
    for name in ("minAvailable", "maxUnavailable"):
        if name in spec:
            _int_or_percent(spec[name], f"spec.{name}", errors)
    R.label_selector(spec.get("selector"), "spec.selector", errors)
    policy = R._str_field(spec, "unhealthyPodEvictionPolicy")
    if policy and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        errors.append(R.unsupported("spec.unhealthyPodEvictionPolicy", policy, UNHEALTHY_POD_EVICTION_POLICIES))


ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
VOLUME_MODES = ("Filesystem", "Block")
RECLAIM_POLICIES = ("Retain", "Delete", "Recycle")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _enum(obj: dict, name: str, allowed, path: str, errors: Errors) -> None:
    v = R._str_field(obj, name)
    if v and v not in allowed:
        errors.append(R.unsupported(f"{path}.{name}" if path else name, v, allowed))


def _access_modes(spec: dict, path: str, errors: Errors) -> None:
    for i, mode in enumerate(R._list(spec.get("accessModes"))):
        if isinstance(mode, str) and mode not in ACCESS_MODES:
            errors.append(R.unsupported(f"{path}.accessModes[{i}]", mode, ACCESS_MODES))


def _pvc(doc: dict, errors: Errors) -> None:
    _claim_spec(R._dict(doc.get("spec")), "spec", errors)


def _claim_spec(spec: dict, path: str, errors: Errors) -> None:
    """A PersistentVolumeClaim's spec at ``path`` (``ValidatePersistentVolumeClaimSpec``): at least one access mode,
    each a known one, a storage request above zero, quantities, the selector."""
    if not R._list(spec.get("accessModes")):
        errors.append(FieldError(f"{path}.accessModes", "Required value: at least 1 access mode is required"))
    _access_modes(spec, path, errors)
    _enum(spec, "volumeMode", VOLUME_MODES, path, errors)
    requests = R.resource_list(R._dict(spec.get("resources")).get("requests"), f"{path}.resources.requests", errors)
    raw_requests = R._dict(R._dict(spec.get("resources")).get("requests"))
    if "storage" not in raw_requests:
        errors.append(FieldError(f"{path}.resources[storage]", "Required value"))
    elif "storage" in requests and requests["storage"][0] <= 0:
        errors.append(FieldError(f"{path}.resources[storage]",
                                 f"Invalid value: {json.dumps(requests['storage'][1])}: must be greater than zero"))
    R.resource_list(R._dict(spec.get("resources")).get("limits"), f"{path}.resources.limits", errors)
    R.label_selector(spec.get("selector"), f"{path}.selector", errors)


def _claim_templates(doc: dict, errors: Errors) -> None:
    """A StatefulSet's ``volumeClaimTemplates``: the API server takes the StatefulSet, but refuses each claim its
    controller makes from a bad template, so its pods never start; reported here, at the template's fields, as the
    claim's own errors (the message says so)."""
    for i, tpl in enumerate(R._list(get(doc, "spec.volumeClaimTemplates"))):
        found: Errors = []
        _claim_spec(R._dict(R._dict(tpl).get("spec")), f"spec.volumeClaimTemplates[{i}].spec", found)
        errors.extend(FieldError(e.path, f"{e.message} (the PersistentVolumeClaims made from this template are "
                                         "refused: the StatefulSet's pods would never start)") for e in found)


def _pv(doc: dict, errors: Errors) -> None:
    spec = R._dict(doc.get("spec"))
    _access_modes(spec, "spec", errors)
    _enum(spec, "volumeMode", VOLUME_MODES, "spec", errors)
    _enum(spec, "persistentVolumeReclaimPolicy", RECLAIM_POLICIES, "spec", errors)
    R.resource_list(spec.get("capacity"), "spec.capacity", errors)
    R.node_selector(R._dict(spec.get("nodeAffinity")).get("required"), "spec.nodeAffinity.required", errors)


def _storage_class(doc: dict, errors: Errors) -> None:
    _enum(doc, "volumeBindingMode", BINDING_MODES, "", errors)
    _enum(doc, "reclaimPolicy", ("Retain", "Delete"), "", errors)
    for i, term in enumerate(R._list(doc.get("allowedTopologies"))):
        for j, expr in enumerate(R._list(R._dict(term).get("matchLabelExpressions"))):
            where = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            R.label_key(R._dict(expr).get("key"), f"{where}.key", errors)
            if not R._list(R._dict(expr).get("values")):
                errors.append(FieldError(f"{where}.values", "Required value: must specify as least one value"))


def _runtime_class(doc: dict, errors: Errors) -> None:
    """``ValidateRuntimeClass``: ``handler`` a DNS-1123 label; ``overhead.podFixed`` checked as a container's limits
    (resource names, quantities not negative: the overhead is added to every pod of the class); ``scheduling``'s node
    selector labels and tolerations.  The API server names an overhead error ``overhead.limits[cpu]``; here it is
    named where it is written, ``overhead.podFixed.cpu``."""
    handler = doc.get("handler")
    if isinstance(handler, str) and handler:
        problem = _dns_label_problem(handler)
        if problem:
            errors.append(FieldError("handler", problem))
    R.overhead(R._dict(doc.get("overhead")).get("podFixed"), "overhead.podFixed", errors)
    scheduling = R._dict(doc.get("scheduling"))
    R.labels(scheduling.get("nodeSelector"), "scheduling.nodeSelector", errors)
    R.tolerations(scheduling.get("tolerations"), "scheduling.tolerations", errors)


_BY_KIND = {"PodDisruptionBudget": _pdb, "PersistentVolumeClaim": _pvc, "PersistentVolume": _pv, "StorageClass": _storage_class,
            "RuntimeClass": _runtime_class}


def rule_errors(doc: dict) -> list[FieldError]:
    """The API server's rules beyond the schema for ``doc`` (any kind; unknown kinds: metadata only)."""
    errors: Errors = []
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else ""
    _metadata(doc, errors)
    if kind in POD_SPEC_PATHS or kind in _COUNTS:
        _workload(doc, kind, errors)
    elif kind in _BY_KIND:
        _BY_KIND[kind](doc, errors)
    return errors


def kube_errors(doc: dict, version: str = KUBERNETES_VERSION) -> list[FieldError]:
    """Everything the API server of Kubernetes ``version`` would refuse in ``doc``, a built-in kind: its schema
    (unknown fields, types, required fields) first, then its rules.  A field the schema already refused is not
    reported again by a rule (one error per mistake).  No error for a kind Kubernetes does not have."""
    found = schema_errors(doc, version)
    if not found and not _builtin(doc, version):
        return []
    bad = {e.path for e in found}
    for e in rule_errors(doc):
        if not any(e.path == p or e.path.startswith(p + ".") or e.path.startswith(p + "[") for p in bad):
            found.append(e)
    return found


def _builtin(doc: dict, version: str) -> bool:
    from .kubeschema import known_kind

    kind = doc.get("kind")
    return isinstance(kind, str) and (kind in POD_SPEC_PATHS or kind in _BY_KIND or known_kind(kind, version))
