"""Load manifests from YAML/JSON text: multi-document files, every error reported.

``load_text`` / ``load_files`` return a :class:`LoadResult` holding the typed
Karpenter objects (NodePool, EC2NodeClass, NodeClaim, CRD defaults applied),
any other Kubernetes objects as :class:`KubeObject` (when ``allow_other_kinds``)
and the list of :class:`ValidationIssue` found.  Reading files is the only
I/O here and it is done by the caller-facing ``load_files`` helper.
"""

from __future__ import annotations

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
        return docs, [ValidationIssue(filename, len(docs), "", "", "", f"invalid YAML{where}: {problem}")]
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


def object_from_dict(doc: dict, path_prefix: str = "") -> tuple[KubeObject | None, list[FieldError]]:
    """Validate one Karpenter object dict and apply defaults; returns (object, errors)."""
    from .validation import validate_and_default  # heavy schema tables, imported on first use

    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    cls = KINDS.get((api_version, kind))
    if cls is None:
        return None, [FieldError("apiVersion", f"unsupported apiVersion/kind {api_version}/{kind}")]
    defaulted, errors = validate_and_default(kind, doc)
    if errors:
        return None, errors
    return cls(defaulted), []


def load_text(text: str, filename: str = "<input>", allow_other_kinds: bool = False) -> LoadResult:
    result = LoadResult()
    docs, issues = parse_documents(text, filename)
    result.issues.extend(issues)
    for index, data in docs:
        if not isinstance(data, dict):
            result.issues.append(ValidationIssue(filename, index, "", "", "", f"expected a mapping (a Kubernetes object), got {type(data).__name__}"))
            continue
        kind = data.get("kind") if isinstance(data.get("kind"), str) else ""
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        name = meta.get("name", "") if isinstance(meta.get("name", ""), str) else ""
        if kind == "List" and isinstance(data.get("items"), list):
            sub = load_text(yaml.safe_dump_all(data["items"]), filename, allow_other_kinds)
            result.extend(sub)
            continue
        if not data.get("apiVersion") or not kind:
            missing = "apiVersion" if not data.get("apiVersion") else "kind"
            result.issues.append(ValidationIssue(filename, index, kind, name, missing, "Required value"))
            continue
        if kind in KIND_BY_NAME:
            obj, errors = object_from_dict(data)
            for err in errors:
                result.issues.append(ValidationIssue(filename, index, kind, name, err.path, err.message))
            if obj is not None:
                result.objects.append(obj)
        elif allow_other_kinds:
            result.objects.append(KubeObject(data))
        elif foreign_node_class(data):
            result.skipped.append(
                ValidationIssue(filename, index, kind, name, "apiVersion", f"skipped: {data.get('apiVersion')} {kind} is another Karpenter provider's node class (only karpenter.k8s.aws/v1 EC2NodeClass is used here)")
            )
        else:
            result.issues.append(
                ValidationIssue(filename, index, kind, name, "kind", f"unsupported kind {data.get('apiVersion')}/{kind}: expected karpenter.sh/v1 NodePool or NodeClaim, karpenter.k8s.aws/v1 EC2NodeClass, or karpenter-lambda.io/v1alpha1 OffPeakSchedule")
            )
    return result


def _decode(data: bytes) -> str:
    """UTF-8 (a BOM is dropped), or UTF-16 when the file starts with its BOM (as some editors on Windows write)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    return data.decode("utf-8-sig")


def load_files(paths, allow_other_kinds: bool = False) -> LoadResult:
    """Load every file (``-`` is not handled here); a directory loads its *.yaml/*.yml/*.json files sorted by name."""
    result = LoadResult()
    for p in paths:
        path = Path(p)
        files = sorted(f for f in path.iterdir() if f.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
        for f in files:
            try:
                text = _decode(f.read_bytes())
            except OSError as e:
                result.issues.append(ValidationIssue(str(f), 0, "", "", "", f"cannot read file: {e.strerror or e}"))
                continue
            except UnicodeDecodeError as e:
                result.issues.append(ValidationIssue(str(f), 0, "", "", "", f"cannot read file: not UTF-8 text (byte {e.start}: {e.reason})"))
                continue
            result.extend(load_text(text, str(f), allow_other_kinds))
    return result
