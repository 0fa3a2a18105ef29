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

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import FieldError, ManifestError, ValidationIssue
from .objects import KIND_BY_NAME, KINDS, KubeObject


@dataclass
class LoadResult:
    objects: list[KubeObject] = field(default_factory=list)
    issues: list[ValidationIssue] = field(default_factory=list)
    # Objects left out without being an error: another Karpenter provider's node class (e.g. the
    # KWOKNodeClass next to a NodePool in Karpenter's own examples).  Only when not allow_other_kinds.
    skipped: list[ValidationIssue] = field(default_factory=list)
    # Notes that are not errors: one per v1beta1 object converted to v1 (path "", message "converted from ...").
    warnings: list[ValidationIssue] = field(default_factory=list)
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
        self.origins.extend(other.origins)
        self._docs.extend(other._docs)


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps and "yes"/"on" style strings out of the way (YAML 1.1 quirks)."""


# Do not turn 2026-01-01 into a date: Kubernetes fields are strings.
_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_documents(text: str, filename: str = "<input>") -> tuple[list[tuple[int, object]], list[ValidationIssue]]:
    """Split text into (doc_index, data) pairs; empty documents are skipped but keep their index."""
    docs: list[tuple[int, object]] = []
    try:
        for i, data in enumerate(yaml.load_all(text, Loader=_Loader)):
            if data is None:
                continue
            docs.append((i, data))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        return docs, [ValidationIssue(filename, len(docs), "", "", "", f"invalid YAML{where}: {problem}", mark.line + 1 if mark else 0)]
    return docs, []


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
    docs, issues = parse_documents(text, filename)
    result.issues.extend(issues)  # invalid YAML: its line is in the message
    out: list[_Doc] = []
    for index, data in docs:
        if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
            out += [_Doc(source, index, item, f"items[{i}].") for i, item in enumerate(data["items"])]
        else:
            out.append(_Doc(source, index, data))
    return out


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
        if not data.get("apiVersion") or not kind:
            missing = "apiVersion" if not data.get("apiVersion") else "kind"
            result.issues.append(d.issue(kind, name, missing, "Required value"))
            continue
        origin = (d.source.filename, d.index)
        if kind in KIND_BY_NAME:
            obj, errors = object_from_dict(data)
            note = " (in the v1 form converted from v1beta1)" if pos in conversion.converted else ""
            for err in errors:
                result.issues.append(d.issue(kind, name, err.path, err.message + note))
            if obj is not None:
                result.objects.append(obj)
                result.origins.append(origin)
                result._docs.append(d)
        elif allow_other_kinds or (accept_kinds is not None and kind in accept_kinds):
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
                d.issue(kind, name, "apiVersion", f"skipped: {data.get('apiVersion')} {kind} is another Karpenter provider's node class (only karpenter.k8s.aws/v1 EC2NodeClass is used here)")
            )
        else:
            expected = ("karpenter.sh/v1 NodePool or NodeClaim, karpenter.k8s.aws/v1 EC2NodeClass, karpenter.sh/v1alpha1 NodeOverlay, "
                        "or karpenter-lambda.io/v1alpha1 OffPeakSchedule")
            if accept_kinds:
                expected += f", or one of {', '.join(sorted(accept_kinds))}"
            if kind == "CapacityBuffer":
                expected = CAPACITY_BUFFER_HINT   # what to use instead says more than the list of kinds
            else:
                expected = f"expected {expected}{_version_hint(data.get('apiVersion'), kind)}"
            result.issues.append(d.issue(kind, name, "kind", f"unsupported kind {data.get('apiVersion')}/{kind}: {expected}"))
    _scenario_steps(result, kubernetes_version)


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


def _scenario_steps(result: LoadResult, kubernetes_version: str | None = None) -> None:
    """Scenario steps naming NodePools checked against the NodePools of this load (see :mod:`.crosscheck`), and the
    manifests its ``apply`` steps will load."""
    from .crosscheck import scenario_step_errors

    scenarios = [i for i, o in enumerate(result.objects) if o.kind == "Scenario" and i < len(result._docs)]
    if not scenarios:
        return
    pools = {o.name: o.to_dict() for o in result.objects if o.kind == "NodePool"}
    for i in scenarios:
        d, obj = result._docs[i], result.objects[i]
        for err in _applied_errors(obj.doc, kubernetes_version) + scenario_step_errors(obj.doc, pools):
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


def load_files(paths, allow_other_kinds: bool = False, accept_kinds=None, kubernetes_version: str | None = None) -> LoadResult:
    """Load every file (``-`` is not handled here); a directory loads its *.yaml/*.yml/*.json files sorted by name.
    A file named twice (itself and its directory) is read once.

    The documents of all files are converted from v1beta1 together (a NodePool's kubelet to its EC2NodeClass), after
    the duplicates are left out (each one error); ``kubernetes_version`` as in :func:`load_text`."""
    result = LoadResult()
    docs: list[_Doc] = []
    read: dict[str, None] = {}  # file names in the order read
    for p in paths:
        path = Path(p)
        files = sorted(f for f in path.iterdir() if f.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
        for f in files:
            if str(f) in read or any(f.resolve() == Path(r).resolve() for r in read):
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
