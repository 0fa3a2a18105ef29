"""Load manifests from YAML/JSON text: multi-document files, every error reported.

``load_text`` / ``load_files`` return a :class:`LoadResult` holding the typed
Karpenter objects (NodePool, EC2NodeClass, NodeClaim, NodeOverlay, CRD defaults applied),
any other Kubernetes objects as :class:`KubeObject` (when ``allow_other_kinds``)
and the list of :class:`ValidationIssue` found.  Reading files is the only
I/O here and it is done by the caller-facing ``load_files`` helper.

Karpenter ``v1beta1`` NodePools and EC2NodeClasses are converted to v1 on the way in
(:mod:`.convert`; all files of one ``load_files`` call together, so a NodePool's kubelet reaches its
EC2NodeClass in another file); each converted object gets one entry in ``LoadResult.warnings``
naming what changed.  Issues and warnings carry ``line``: the 1-based line of the field when it can be
found in the YAML, else of the document's first line (0 when unknown).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import FieldError, ManifestError, ValidationIssue
from .objects import KIND_BY_NAME, KINDS, KubeObject
from .text import did_you_mean, near


@dataclass
class LoadResult:
    objects: list[KubeObject] = field(default_factory=list)
    issues: list[ValidationIssue] = field(default_factory=list)
    # Objects left out without being an error: another Karpenter provider's node class (e.g. the
    # KWOKNodeClass next to a NodePool in Karpenter's own examples).  Only when not allow_other_kinds.
    skipped: list[ValidationIssue] = field(default_factory=list)
    # Notes that are not errors: one per v1beta1 object converted to v1 (path "", message "converted from ...").
    warnings: list[ValidationIssue] = field(default_factory=list)
    # Documents of a built-in Kubernetes kind that nothing here reads (a ConfigMap, a Secret, a Role: `helm template`
    # output), checked as the API server checks them and left out with one note each (path "kind", "not read: ...");
    # only when ``accept_kinds`` is given (with ``allow_other_kinds`` they are kept as KubeObjects).
    unread: list[ValidationIssue] = field(default_factory=list)
    # Per object in ``objects`` (same order, when loaded here): (file, doc_index) it came from; see line_of.
    origins: list[tuple[str, int]] = field(default_factory=list)
    _docs: list = field(default_factory=list, repr=False, compare=False)

    def line_of(self, i: int, path: str = "") -> int:
        """1-based line of ``path`` in the document of ``objects[i]`` (of its first line with no path); 0 when unknown."""
        return self._docs[i].line(path) if 0 <= i < len(self._docs) else 0

    @property
    def ok(self) -> bool:
        return not self.issues

    def of_kind(self, kind: str) -> list[KubeObject]:
        return [o for o in self.objects if o.kind == kind]

    def raise_for_issues(self) -> "LoadResult":
        if self.issues:
            raise ManifestError(self.issues)
        return self

    def extend(self, other: "LoadResult") -> None:
        self.objects.extend(other.objects)
        self.issues.extend(other.issues)
        self.skipped.extend(other.skipped)
        self.warnings.extend(other.warnings)
        self.unread.extend(other.unread)
        self.origins.extend(other.origins)
        self._docs.extend(other._docs)


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps and "yes"/"on" style strings out of the way (YAML 1.1 quirks), and notes every
    key a mapping sets twice (YAML keeps the last silently; the API server's strict field validation refuses it)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.repeated: list[tuple[yaml.Node, yaml.Node]] = []   # (the key set again, where it was first set)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], yaml.Node] = {}
            for key_node, _ in node.value:   # the keys written here, before a merge (<<) adds its own
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                seen = first.setdefault((key_node.tag, key_node.value), key_node)
                if seen is not key_node:
                    self.repeated.append((key_node, seen))
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep=deep)   # (PyYAML's error)
        self.flatten_mapping(node)   # a merge (<<) brings its keys in, as SafeLoader does
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            # keys are strings in Kubernetes objects: kubectl's YAML-to-JSON step writes ``1:`` / ``true:`` as "1" /
            # "true" (a nodeSelector {1: a} would otherwise match no label, silently; and 1 and true one key)
            if not isinstance(key, str):
                try:
                    hash(key)
                except TypeError:
                    raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                            "found unhashable key", key_node.start_mark) from None
                key = _key_text(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _key_text(key) -> object:
    """A mapping key as JSON writes it: booleans ``true``/``false``, null ``null``, numbers as written by str."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key) if isinstance(key, (int, float)) else key


# Do not turn 2026-01-01 into a date: Kubernetes fields are strings.
_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _parse(text: str, filename: str):
    """(the (doc_index, data) pairs, the invalid-YAML issues, {doc_index: [(key set again, first one), ...]})."""
    docs: list[tuple[int, object]] = []
    repeated: dict[int, list[tuple[yaml.Node, yaml.Node]]] = {}
    loader = _Loader(text)
    try:
        i = 0
        while loader.check_data():
            loader.repeated = []
            data = loader.get_data()
            if loader.repeated:
                repeated[i] = loader.repeated
            if data is not None:
                docs.append((i, data))
            i += 1
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        return docs, [ValidationIssue(filename, len(docs), "", "", "", f"invalid YAML{where}: {problem}", mark.line + 1 if mark else 0)], repeated
    finally:
        loader.dispose()
    return docs, [], repeated


def _repeated_message(key: yaml.Node, first: yaml.Node, top_level: bool) -> str:
    hint = ""
    if top_level and key.value in ("apiVersion", "kind"):
        hint = " (two documents without a --- line between them?)"
    return (f"duplicate field {json.dumps(key.value)} (first on line {first.start_mark.line + 1}){hint}: the API server "
            f"refuses it (strict field validation); YAML would silently keep the last")


def parse_documents(text: str, filename: str = "<input>") -> tuple[list[tuple[int, object]], list[ValidationIssue]]:
    """Split text into (doc_index, data) pairs; empty documents are skipped but keep their index.  The issues: invalid
    YAML, and each key a mapping sets twice (``duplicate field "containers"``, at the line it is set again)."""
    docs, issues, repeated = _parse(text, filename)
    for index, pairs in sorted(repeated.items()):
        issues += [ValidationIssue(filename, index, "", "", "", _repeated_message(k, f, False), k.start_mark.line + 1)
                   for k, f in pairs]
    return docs, issues


KARPENTER_GROUPS = ("karpenter.sh", "karpenter.k8s.aws")


def foreign_node_class(data: dict) -> bool:
    """A node class of another Karpenter provider (``karpenter.kwok.sh`` KWOKNodeClass, ``karpenter.azure.com``
    AKSNodeClass, ...): a kind ending in NodeClass whose API group is a ``karpenter`` one other than ours."""
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not kind.endswith("NodeClass"):
        return False
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return group not in KARPENTER_GROUPS and "karpenter" in group.split(".")


#: Karpenter's pre-v1beta1 kinds and what they became.
_ALPHA_KINDS = {"Provisioner": "NodePool", "AWSNodeTemplate": "EC2NodeClass", "Machine": "NodeClaim"}
# Karpenter's CapacityBuffer (autoscaling.x-k8s.io/v1alpha1, its alpha CapacityBuffer feature gate, off by default;
# docs/api.md "Not supported"): refused by name, with what to use instead
CAPACITY_BUFFER_HINT = ("Karpenter's alpha CapacityBuffer, with the PodTemplate it names, is not supported by "
                        "karpenter-lambda: for spare capacity, run a Deployment of placeholder pods with the buffer's "
                        "requests in a PriorityClass of negative value; they are provisioned for like any pending pod, "
                        "and the kube-scheduler preempts them for real pods")


def _buffer_kind(api_version, kind) -> bool:
    return kind == "CapacityBuffer" or (kind == "PodTemplate" and api_version == "v1")


def _version_hint(api_version, kind: str) -> str:
    """What to do with another version of a kind we know (or one of Karpenter's alpha kinds)."""
    if _buffer_kind(api_version, kind):   # a PodTemplate: maybe not a buffer's, so after the list of kinds
        return f" (nothing here reads a PodTemplate; {CAPACITY_BUFFER_HINT})"
    if kind in _ALPHA_KINDS:
        return (f" (Karpenter's v1alpha5 {kind} became the v1beta1 {_ALPHA_KINDS[kind]}: migrate it to v1beta1 as Karpenter's "
                f"v1beta1 migration guide says; v1beta1 NodePools and EC2NodeClasses are then converted to v1 here)")
    cls = KIND_BY_NAME.get(kind)
    if kind == "NodeOverlay":
        return f" (expected {cls.api_version}, the only NodeOverlay version)"
    if cls is None or kind not in ("NodePool", "EC2NodeClass", "NodeClaim"):
        return ""
    if kind == "NodeClaim" and isinstance(api_version, str) and api_version.endswith("/v1beta1"):
        return f" (expected {cls.api_version}; NodeClaims are made by the controller: give the NodePool instead)"
    return f" (expected {cls.api_version}; karpenter.sh/v1beta1 NodePools and karpenter.k8s.aws/v1beta1 EC2NodeClasses are converted to v1)"


def object_from_dict(doc: dict, path_prefix: str = "") -> tuple[KubeObject | None, list[FieldError]]:
    """Validate one Karpenter object dict and apply defaults; returns (object, errors)."""
    from .validation import validate_and_default  # heavy schema tables, imported on first use

    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    cls = KINDS.get((api_version, kind))
    if cls is None:
        return None, [FieldError("apiVersion", f"unsupported apiVersion/kind {api_version}/{kind}{_version_hint(api_version, kind)}")]
    defaulted, errors = validate_and_default(kind, doc)
    if errors:
        return None, errors
    return cls(defaulted), []


class _Source:
    """One input text: its name, and (computed only when a line is asked for) its YAML node trees."""

    def __init__(self, filename: str, text: str):
        self.filename, self.text = filename, text
        self._roots: list | None = None

    def _nodes(self) -> list:
        if self._roots is None:
            try:
                self._roots = list(yaml.compose_all(self.text, Loader=_Loader))
            except yaml.YAMLError:
                self._roots = []
        return self._roots

    def line(self, index: int, path: str = "") -> int:
        """1-based line of ``path`` (dotted, ``[i]`` indexes) in document ``index``, else of the deepest part of it
        found, else of the document's first content line; 0 when unknown."""
        roots = self._nodes()
        if not 0 <= index < len(roots) or roots[index] is None:
            return 0
        node = roots[index]
        line = node.start_mark.line + 1
        for part in _path_parts(path):
            nxt = None
            if isinstance(part, int) and isinstance(node, yaml.SequenceNode) and part < len(node.value):
                nxt = node.value[part]
                line = nxt.start_mark.line + 1
            elif isinstance(part, str) and isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == part:
                        nxt, line = v, k.start_mark.line + 1
                        break
            if nxt is None:
                break
            node = nxt
        return line

    def key_path(self, index: int, key: yaml.Node) -> str:
        """The dotted path (``spec.containers``, ``metadata.labels[app.kubernetes.io/name]``) of the mapping key
        written where ``key`` starts, in document ``index``; "" when not found."""
        roots = self._nodes()
        if not 0 <= index < len(roots) or roots[index] is None:
            return ""
        at = (key.start_mark.line, key.start_mark.column)

        def walk(node, path: str) -> str | None:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                    here = (f"{path}.{name}" if path else name) if _PLAIN_KEY.match(name) else f"{path}[{name}]"
                    if (k.start_mark.line, k.start_mark.column) == at:
                        return here
                    found = walk(v, here)
                    if found is not None:
                        return found
            elif isinstance(node, yaml.SequenceNode):
                for i, v in enumerate(node.value):
                    found = walk(v, f"{path}[{i}]")
                    if found is not None:
                        return found
            return None

        return walk(roots[index], "") or ""


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


_PATH_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")


def _path_parts(path: str) -> list:
    """``spec.requirements[2].key`` -> ["spec", "requirements", 2, "key"]; ``spec.limits[cpu]`` -> [..., "limits", "cpu"]
    (a map key in brackets may hold dots, e.g. ``labels[karpenter.sh/capacity-type]``)."""
    parts: list = []
    for bracket, name in _PATH_TOKEN.findall(path or ""):
        if name:
            parts.append(name)
        else:
            key = bracket.strip("'\"")
            parts.append(int(key) if key.isdigit() else key)
    return parts


@dataclass
class _Doc:
    source: _Source
    index: int
    data: object
    prefix: str = ""  # "items[3]." for the items of a List document

    def line(self, path: str = "") -> int:
        return self.source.line(self.index, (self.prefix + path) if path else self.prefix.rstrip("."))

    def issue(self, kind: str, name: str, path: str, message: str) -> ValidationIssue:
        line = self.line(path)
        return ValidationIssue(self.source.filename, self.index, kind, name, path, message, line)


def _documents(text: str, filename: str, result: LoadResult) -> list[_Doc]:
    source = _Source(filename, text)
    docs, issues, repeated = _parse(text, filename)
    result.issues.extend(issues)  # invalid YAML: its line is in the message
    out: list[_Doc] = []
    for index, data in docs:
        if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
            found = [_Doc(source, index, item, f"items[{i}].") for i, item in enumerate(data["items"])]
        else:
            found = [_Doc(source, index, data)]
        out += _without_repeated_keys(found, repeated.get(index, ()), result)
    return out


def _without_repeated_keys(docs: list[_Doc], pairs, result: LoadResult) -> list[_Doc]:
    """The documents (a List's items: each its own) of one YAML document without those setting a key twice: one
    error per key set again (``spec.containers: duplicate field "containers" (first on line 4) ...``), at the line
    it is set again; such an object is not loaded (the API server refuses it whole)."""
    bad: set[int] = set()
    for key, first in pairs:
        path = docs[0].source.key_path(docs[0].index, key) if docs else ""
        owner = next((i for i, d in enumerate(docs) if d.prefix and path.startswith(d.prefix)), None)
        targets = [owner] if owner is not None else list(range(len(docs)))
        d = docs[targets[0]] if docs else None
        if d is None:
            continue
        bad.update(targets)
        kind, name = _meta(d.data) if isinstance(d.data, dict) else ("", "")
        relative = path[len(d.prefix):] if d.prefix and path.startswith(d.prefix) else path
        result.issues.append(ValidationIssue(d.source.filename, d.index, kind, name, relative,
                                             _repeated_message(key, first, "." not in relative and "[" not in relative),
                                             key.start_mark.line + 1))
    return [d for i, d in enumerate(docs) if i not in bad]


def _meta(data: dict) -> tuple[str, str]:
    kind = data.get("kind") if isinstance(data.get("kind"), str) else ""
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    name = meta.get("name", "") if isinstance(meta.get("name", ""), str) else ""
    return kind, name


def _load_documents(docs: list[_Doc], result: LoadResult, allow_other_kinds: bool, accept_kinds,
                    kubernetes_version: str | None = None) -> None:
    from .convert import convert_documents
    from .crosscheck import duplicates

    repeated = duplicates([(f"{d.source.filename}:{d.index}", d.data) for d in docs])
    for pos, first in repeated.items():  # left out before the conversion: it must not write into the other object
        result.issues.append(docs[pos].issue(*_meta(docs[pos].data), "", f"duplicate of {first}"))
    docs = [d for pos, d in enumerate(docs) if pos not in repeated]
    conversion = convert_documents([d.data for d in docs])
    for msg in conversion.warnings:
        d = docs[msg.position]
        result.warnings.append(d.issue(*_meta(d.data), msg.path, msg.message))
    failed = set()
    for msg in conversion.errors:
        d = docs[msg.position]
        result.issues.append(d.issue(*_meta(d.data), msg.path, msg.message))
        failed.add(msg.position)
    for pos, d in enumerate(docs):
        if pos in failed:
            continue
        data = conversion.docs[pos]
        if not isinstance(data, dict):
            result.issues.append(d.issue("", "", "", f"expected a mapping (a Kubernetes object), got {type(data).__name__}"))
            continue
        kind, name = _meta(data)
        shape = _shape_error(data)
        if shape is not None:
            result.issues.append(d.issue(kind, name, *shape))
            continue
        origin = (d.source.filename, d.index)
        api_version = data["apiVersion"]
        if kind in KIND_BY_NAME:
            obj, errors = object_from_dict(data)
            note = " (in the v1 form converted from v1beta1)" if pos in conversion.converted else ""
            for err in errors:
                result.issues.append(d.issue(kind, name, err.path, err.message + note))
            if obj is not None:
                result.objects.append(obj)
                result.origins.append(origin)
                result._docs.append(d)
            continue
        accepted = accept_kinds is not None and kind in accept_kinds
        if not accepted and not foreign_node_class(data) and not _buffer_kind(api_version, kind):
            real, why = _other_kind(api_version, kind, kubernetes_version) if (allow_other_kinds or accept_kinds) \
                else (None, "")
            if real is False:    # a kind nobody knows: a typo, whatever the command
                result.issues.append(d.issue(kind, name, "kind", _unsupported(api_version, kind, why, accept_kinds,
                                                                              allow_other_kinds, kubernetes_version)))
                continue
            if real and not allow_other_kinds:   # a built-in kind nothing here reads: checked as the API server would, left out
                errors = _kube_errors(data, kubernetes_version)
                result.issues += sorted((d.issue(kind, name, err.path, err.message) for err in errors), key=lambda i: i.line)
                if not errors:
                    result.unread.append(d.issue(kind, name, "kind", f"not read: {api_version} {kind} ({why}) is left "
                                                                     f"out: validate, plan and simulate do not use it"))
                continue
        if allow_other_kinds or accepted:
            errors = _kube_errors(data, kubernetes_version)
            # in the order of the file (the schema's and the rules' errors mixed)
            result.issues += sorted((d.issue(kind, name, err.path, err.message) for err in errors), key=lambda i: i.line)
            if errors:
                continue
            result.objects.append(KubeObject(data))
            result.origins.append(origin)
            result._docs.append(d)
        elif foreign_node_class(data):
            result.skipped.append(
                d.issue(kind, name, "apiVersion", f"skipped: {api_version} {kind} is another Karpenter provider's node class (only karpenter.k8s.aws/v1 EC2NodeClass is used here)")
            )
        else:
            result.issues.append(d.issue(kind, name, "kind", _unsupported(api_version, kind, "", accept_kinds, False,
                                                                          kubernetes_version)))
    _scenario_steps(result, kubernetes_version, [d.data for d in docs])


def _shape_error(data: dict) -> tuple[str, str] | None:
    """(path, message) when the object's apiVersion, kind or metadata is missing or of the wrong type, else None."""
    for field in ("apiVersion", "kind"):
        value = data.get(field)
        if value is None or value == "":
            return field, "Required value"
        if not isinstance(value, str):
            return field, f"Invalid value: must be a string (such as {'apps/v1' if field == 'apiVersion' else 'Deployment'}), got {_type_name(value)}"
    meta = data.get("metadata")
    if "metadata" in data and not isinstance(meta, dict):
        return "metadata", f"Invalid value: must be an object (with a name), got {_type_name(meta)}"
    return None


def _type_name(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


#: API groups whose every kind is known here (Karpenter's and karpenter-lambda's): another kind of theirs is a mistake
OWN_GROUPS = KARPENTER_GROUPS + ("karpenter-lambda.io",)
_CORE_KINDS = ("NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay", "OffPeakSchedule", "Scenario")


def _builtin_kinds(version: str | None = None) -> dict[str, dict[str, tuple[str, ...]]]:
    """:func:`.kubeschema.builtin_kinds` (imported when a kind is looked up: the schemas are not read otherwise)."""
    from .kubeschema import builtin_kinds

    return builtin_kinds(version)


def _other_kind(api_version: str, kind: str, version: str | None) -> tuple[bool | None, str]:
    """A kind none of Karpenter's: (True, what it is) for a built-in Kubernetes kind (a ConfigMap, a Secret: read by
    nothing here, it is "not read"), (False, why) for a kind nobody here knows (a typo of a built-in or Karpenter kind,
    an API group Kubernetes does not have, another project's custom resource), (None, "") when it cannot be told (no
    schemas installed)."""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    if group in OWN_GROUPS:   # simulate's Scenario is the one kind of ours without a class
        return (True, "simulate's Scenario") if kind == "Scenario" else (False, "")
    kinds = _builtin_kinds(version)
    if not kinds:
        return None, ""
    if group in kinds:
        if kind in kinds[group]:
            return True, "a Kubernetes kind"
        return False, f"Kubernetes has no kind {kind} in {'the core API group (v1)' if not group else 'API group ' + group}"
    served = sorted(f"{g}/{v}" if g else v for g, ks in kinds.items() if kind in ks for v in ks[kind])
    if served:
        return False, f"Kubernetes serves {kind} as {', '.join(served)}"
    if "." in group:   # another project's custom resource: its schema is not known here, nor what it would do
        return False, f"karpenter-lambda does not know the kind {kind} of {group} (a custom resource)"
    return False, f"Kubernetes has no API group {group!r} (a custom resource's group has a dot)"


def _near_kinds(kind: str, accept_kinds, version: str | None) -> list[str]:
    """The known kinds one typo (or only letter case) away from ``kind``."""
    known = set(_CORE_KINDS) | set(accept_kinds or ()) | {k for ks in _builtin_kinds(version).values() for k in ks}
    return sorted(set(near(kind, known)) | {k for k in known if k.lower() == kind.lower() and k != kind})


def _unsupported(api_version: str, kind: str, why: str, accept_kinds, allow_other_kinds: bool,
                 version: str | None) -> str:
    """The error of a kind nothing here takes: why, what was meant (did you mean), what is taken."""
    head = f"unsupported kind {api_version}/{kind}"
    if kind == "CapacityBuffer":
        return f"{head}: {CAPACITY_BUFFER_HINT}"   # what to use instead says more than the list of kinds
    if _buffer_kind(api_version, kind):
        hint = ""
    else:
        hint = did_you_mean(_near_kinds(kind, accept_kinds, version))
    if allow_other_kinds and why:
        return f"{head}{hint}: {why}"
    expected = ("karpenter.sh/v1 NodePool or NodeClaim, karpenter.k8s.aws/v1 EC2NodeClass, karpenter.sh/v1alpha1 NodeOverlay, "
                "or karpenter-lambda.io/v1alpha1 OffPeakSchedule")
    if accept_kinds:
        expected += f", or one of {', '.join(sorted(accept_kinds))}"
    return f"{head}{hint}: {why + '; ' if why else ''}expected {expected}{_version_hint(api_version, kind)}"


def _kube_errors(data: dict, kubernetes_version: str | None) -> list[FieldError]:
    """What the API server of the cluster's Kubernetes version refuses in a built-in kind (none for other kinds)."""
    from .kuberules_objects import kube_errors
    from .kubeschema import KUBERNETES_VERSION

    return kube_errors(data, kubernetes_version or KUBERNETES_VERSION)


def _applied_errors(scenario: dict, kubernetes_version: str | None) -> list[FieldError]:
    """The manifests of a Scenario's ``apply`` steps, checked now as the step will load them (a Karpenter v1 kind
    with its CRD rules, a built-in kind as the API server would), so a bad one is refused before the run."""
    out: list[FieldError] = []
    steps = (scenario.get("spec") or {}).get("steps") if isinstance(scenario.get("spec"), dict) else None
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        doc = step.get("apply") if isinstance(step, dict) else None
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            continue
        if isinstance(doc.get("apiVersion"), str) and (doc["apiVersion"], doc["kind"]) in KINDS:
            errors = object_from_dict(doc)[1]
        elif doc["kind"] in KIND_BY_NAME:   # another version (v1beta1): converted when the step runs
            continue
        else:
            errors = _kube_errors(doc, kubernetes_version)
        out += [FieldError(f"spec.steps[{i}].apply.{e.path}" if e.path else f"spec.steps[{i}].apply", e.message) for e in errors]
    return out


def _scenario_steps(result: LoadResult, kubernetes_version: str | None = None, given=()) -> None:
    """Scenario steps naming NodePools checked against the NodePools of this load (see :mod:`.crosscheck`), steps
    naming workloads and EC2NodeClasses against the documents ``given`` (:func:`.scenario.workload_step_errors`; a
    document with errors counts: its own errors say what is wrong), and the manifests its ``apply`` steps will load.
    A Scenario loaded without any NodePool or workload (validated on its own) is checked against nothing."""
    from .crosscheck import identity, scenario_step_errors
    from .scenario import workload_step_errors
    from .workloads import WORKLOAD_KINDS

    scenarios = [i for i, o in enumerate(result.objects) if o.kind == "Scenario" and i < len(result._docs)]
    if not scenarios:
        return
    pools = {o.name: o.to_dict() for o in result.objects if o.kind == "NodePool"}
    present = {(key[1], key[2], key[3]) for key in map(identity, given) if key is not None}
    with_manifests = any(kind in WORKLOAD_KINDS or kind == "NodePool" for kind, _, _ in present)
    for i in scenarios:
        d, obj = result._docs[i], result.objects[i]
        found = _applied_errors(obj.doc, kubernetes_version) + scenario_step_errors(obj.doc, pools)
        if with_manifests:
            found += workload_step_errors(obj.doc, present)
        for err in found:
            result.issues.append(d.issue(obj.kind, obj.name, err.path, err.message))


def load_text(text: str, filename: str = "<input>", allow_other_kinds: bool = False, accept_kinds=None,
              kubernetes_version: str | None = None) -> LoadResult:
    """Load every document of ``text``.  ``allow_other_kinds``: any other kind is kept as a :class:`KubeObject`;
    ``accept_kinds``: only these other kinds are (the rest are errors, as without either).  Built-in Kubernetes
    kinds are checked as the API server of ``kubernetes_version`` (default :data:`.kubeschema.KUBERNETES_VERSION`)
    checks them; the same object twice is an error (:mod:`.crosscheck`)."""
    result = LoadResult()
    _load_documents(_documents(text, filename, result), result, allow_other_kinds, accept_kinds, kubernetes_version)
    return result


def _decode(data: bytes) -> str:
    """UTF-8 (a BOM is dropped), or UTF-16 when the file starts with its BOM (as some editors on Windows write)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    return data.decode("utf-8-sig")


#: the name issues give a document read from standard input (FILE ``-``)
STDIN = "<stdin>"


def load_files(paths, allow_other_kinds: bool = False, accept_kinds=None, kubernetes_version: str | None = None,
               stdin: str | None = None) -> LoadResult:
    """Load every file; a directory loads its *.yaml/*.yml/*.json files sorted by name; ``-`` is ``stdin``, the text
    the caller read from standard input (named ``<stdin>``; read once however often ``-`` is given).  A file named
    twice (itself and its directory) is read once.

    The documents of all files are converted from v1beta1 together (a NodePool's kubelet to its EC2NodeClass), after
    the duplicates are left out (each one error, across files and stdin alike); ``kubernetes_version`` as in
    :func:`load_text`."""
    result = LoadResult()
    docs: list[_Doc] = []
    read: dict[str, None] = {}  # file names in the order read
    for p in paths:
        if str(p) == "-":
            if STDIN not in read:
                read.setdefault(STDIN, None)
                docs += _documents(stdin or "", STDIN, result)
            continue
        path = Path(p)
        files = sorted(f for f in path.iterdir() if f.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
        for f in files:
            if str(f) in read or any(r != STDIN and f.resolve() == Path(r).resolve() for r in read):
                continue
            read.setdefault(str(f), None)
            try:
                text = _decode(f.read_bytes())
            except OSError as e:
                result.issues.append(ValidationIssue(str(f), 0, "", "", "", f"cannot read file: {e.strerror or e}"))
                continue
            except UnicodeDecodeError as e:
                result.issues.append(ValidationIssue(str(f), 0, "", "", "", f"cannot read file: not UTF-8 text (byte {e.start}: {e.reason})"))
                continue
            docs += _documents(text, str(f), result)
    _load_documents(docs, result, allow_other_kinds, accept_kinds, kubernetes_version)
    # issues file by file, in the order the files were read (a file's YAML error with that file's other issues)
    order = {name: i for i, name in enumerate(read)}
    result.issues.sort(key=lambda issue: order.get(issue.file, -1))
    return result
