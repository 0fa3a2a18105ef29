"""`karpenter-lambda validate FILE...`: check manifests offline (everything `simulate` takes).

Karpenter objects (NodePool, EC2NodeClass, NodeClaim, OffPeakSchedule; v1beta1 NodePools and EC2NodeClasses are
converted to v1 with a warning) are checked with Karpenter's CRD rules; workloads (Deployment, StatefulSet,
ReplicaSet, Job, CronJob, DaemonSet, Pod), PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes,
StorageClasses and a simulate Scenario are accepted and checked
as `simulate` reads them: built-in Kubernetes kinds as the API server of the cluster's Kubernetes version checks them
(its OpenAPI schema, strict: an unknown field is an error; quantities, enum values, PDB rules; ``--kubernetes-version``,
env ``KARPENTER_LAMBDA_KUBERNETES_VERSION``, default :data:`~karpenter_lambda.api.kubeschema.KUBERNETES_VERSION`),
the same object twice is one ``duplicate of FILE:DOC`` error, Scenario steps name NodePools that exist and can
be interrupted that way.  Exit 0 when every object is valid, 1 when any issue is found or no object was
given (an empty file or directory), 2 on usage errors (no such file).  Each issue goes to stderr as
``FILE:DOC_INDEX: Kind/name: field.path: message (line N)`` followed by a summary line (warnings, e.g. a
v1beta1 conversion, the same way with ``warning:``); ``--json`` prints one JSON document on stdout instead:
``{"valid": bool, "objects": [{"kind", "name", "file"}], "errors": [issue.to_dict(), ...], "skipped": [...],
"warnings": [...]}`` (each issue dict has ``line``: 1-based, 0 when unknown).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..api.errors import ValidationIssue
from ..api.kubeschema import KUBERNETES_VERSION, schema_version
from ..api.manifests import LoadResult, load_files
from ..api.roles import node_role_warnings
from ..api.text import plural
from .watcher import known_cluster

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: the environment variable naming the cluster's Kubernetes version (also read by the deployed functions)
KUBERNETES_VERSION_ENV = "KARPENTER_LAMBDA_KUBERNETES_VERSION"


class InputError(Exception):
    """A file argument that cannot be used at all (missing): a usage error, exit 2."""


def simulate_kinds() -> frozenset[str]:
    """The kinds other than Karpenter's that `simulate` takes: workloads, the Scenario, stored kinds (PDBs)."""
    from ..api.scenario import KIND as SCENARIO
    from ..api.workloads import WORKLOAD_KINDS
    from ..sim.simulator import STORED_KINDS

    return frozenset(WORKLOAD_KINDS) | {SCENARIO} | frozenset(STORED_KINDS)


def kubernetes_version(args: argparse.Namespace | None = None) -> str:
    """The Kubernetes version manifests are checked against: ``--kubernetes-version``, else the environment's
    ``KARPENTER_LAMBDA_KUBERNETES_VERSION``, else the simulated cluster's.  Raises :class:`InputError` (exit 2)
    for a value that is not a version the schemas cover."""
    flag = getattr(args, "kubernetes_version", None)
    value = flag or os.environ.get(KUBERNETES_VERSION_ENV) or KUBERNETES_VERSION
    source = "--kubernetes-version" if flag else (f"environment variable {KUBERNETES_VERSION_ENV}"
                                                  if os.environ.get(KUBERNETES_VERSION_ENV) else "--kubernetes-version")
    try:
        schema_version(value)
    except ValueError as e:
        raise InputError(f"{source}: {e}") from None
    except ImportError:  # no schemas installed: the rules beyond the schema still apply
        pass
    return value


def load_inputs(paths: list[str], allow_other_kinds: bool = False, accept_kinds=None,
                version: str | None = None) -> tuple[LoadResult, list[str]]:
    """Load every FILE (a file, a directory of *.yaml/*.yml/*.json, or ``-`` for stdin, read once).

    Returns the load result and, per object in order, the file it came from.  The files and stdin are loaded together,
    in the order given (a v1beta1 NodePool's kubelet reaches its EC2NodeClass in another file; the same object on stdin
    and in a file is a duplicate).  Raises :class:`InputError` naming every missing path.
    """
    missing = [p for p in paths if p != "-" and not Path(p).exists()]
    if missing:
        raise InputError("; ".join(f"{p}: no such file or directory" for p in missing))
    stdin = read_stdin() if "-" in paths else None
    result = load_files(paths, allow_other_kinds, accept_kinds, version, stdin=stdin) if paths else LoadResult()
    return result, [f for f, _ in result.origins]


def read_stdin() -> str:
    """Standard input as text (FILE ``-``), a byte-order mark dropped as for files."""
    text = sys.stdin.read()
    return text[1:] if text.startswith("\ufeff") else text


def empty_inputs(paths: list[str], result: LoadResult) -> list[ValidationIssue]:
    """One issue per FILE argument that gave nothing at all: an empty file, a directory without manifests."""
    # (as the loader names them: a path as Path spells it, "./a.yaml" and "dir//a.yaml" as "a.yaml" and "dir/a.yaml")
    seen = {i.file for i in result.issues + result.skipped + result.warnings + result.unread} | {f for f, _ in result.origins}
    seen |= {str(Path(f)) for f in seen if f and f != "<stdin>"}
    out = []
    for p in paths:
        if p == "-":
            if "<stdin>" not in seen:
                out.append(ValidationIssue("<stdin>", 0, "", "", "", "no Kubernetes objects on stdin (empty input)"))
            continue
        path = Path(p)
        if path.is_dir():
            inside = [f for f in sorted(path.iterdir()) if f.suffix in MANIFEST_SUFFIXES]
            if not inside:
                out.append(ValidationIssue(p, 0, "", "", "", f"no manifests in directory {p} (no *.yaml, *.yml or *.json files)"))
                continue
            out += [ValidationIssue(str(f), 0, "", "", "", f"no Kubernetes objects in {f} (empty file)") for f in inside if str(f) not in seen]
        elif p not in seen and str(path) not in seen:
            out.append(ValidationIssue(p, 0, "", "", "", f"no Kubernetes objects in {p} (empty file)"))
    return out


def content_issues(result: LoadResult) -> list[ValidationIssue]:
    """What `simulate` would refuse in the accepted non-Karpenter objects: workloads it cannot expand, a bad Scenario."""
    from ..api.scenario import KIND as SCENARIO, ScenarioError, parse_scenario
    from ..api.workloads import WORKLOAD_KINDS, expand

    out: list[ValidationIssue] = []
    for i, obj in enumerate(result.objects):
        if i >= len(result.origins):
            break
        file, index = result.origins[i]
        found: list[ValidationIssue] = []
        if obj.kind in WORKLOAD_KINDS:
            found = expand(obj.doc, file, index).issues
        elif obj.kind == SCENARIO:  # (one Scenario per run is simulate's rule: validate may see several examples)
            try:
                parse_scenario(obj.doc, file, index)
            except ScenarioError as e:
                name = (obj.doc.get("metadata") or {}).get("name") if isinstance(obj.doc.get("metadata"), dict) else ""
                prefix = f"{file}:{index}: {SCENARIO}/{name if isinstance(name, str) and name else '<unnamed>'}: "
                for line in str(e).splitlines():
                    text = line[len(prefix):] if line.startswith(prefix) else line
                    path, sep, message = text.partition(": ")
                    if not sep or " " in path:
                        path, message = "", text
                    found.append(ValidationIssue(file, index, SCENARIO, obj.name, path, message))
        out += [ValidationIssue(x.file, x.doc_index, x.kind, x.name, x.path, x.message, x.line or result.line_of(i, x.path))
                for x in found]
    return out


def format_issue(issue: ValidationIssue, label: str = "") -> str:
    """``FILE:DOC: Kind/name: field: message`` (str(issue), the stable part) + `` (line N)`` when known."""
    text = str(issue)
    if label:
        obj = f"{issue.kind or '?'}/{issue.name or '?'}"
        text = f"{issue.file}:{issue.doc_index}: {obj}: {label}: {issue.message}"
    if issue.line and "(line " not in issue.message:
        text += f" (line {issue.line})"
    return text


def summary(result: LoadResult, files: list[str]) -> str:
    """One line: ``valid: 3 objects in 2 files`` or ``invalid: 4 errors in 1 file (2 valid objects)``."""
    if result.issues:
        bad_files = len({i.file for i in result.issues})
        return (f"invalid: {plural(len(result.issues), 'error')} in {plural(bad_files, 'file')} "
                f"({plural(len(result.objects), 'valid object')})")
    line = f"valid: {plural(len(result.objects), 'object')} in {plural(len(set(files)), 'file')}"
    if result.skipped:
        line += f" ({len(result.skipped)} skipped: another provider's node class)"
    if result.unread:
        line += f" ({len(result.unread)} not read: {', '.join(f'{i.kind}/{i.name or chr(63)}' for i in result.unread[:3])}" \
                f"{', ...' if len(result.unread) > 3 else ''})"
    converted = sum(1 for w in result.warnings if w.message.startswith("converted from "))
    if converted:
        line += f" ({converted} converted from v1beta1)"
    return line


def _placed(result: LoadResult, i: int, found) -> list[ValidationIssue]:
    """FieldErrors of ``result.objects[i]`` as issues at its file and document, each with its field's line."""
    if i >= len(result.origins):
        return []
    obj, (file, index) = result.objects[i], result.origins[i]
    return [ValidationIssue(file, index, obj.kind, obj.name, e.path, e.message, result.line_of(i, e.path)) for e in found]


def pod_warnings(result: LoadResult) -> list[ValidationIssue]:
    """Workloads asking for node labels no node has (a typo of a well-known key or value) or with a spread or pod
    affinity term selecting no pods (``api/pod_hints.py``), or one typo off the taints and labels of the NodePools
    given (``api/pool_hints.py``): warnings, not errors; the text names the key or term and the line, ``--json`` the
    field's path."""
    from ..api.kuberules_objects import POD_SPEC_PATHS, get
    from ..api.pod_hints import pod_spec_hints
    from ..api.pool_hints import nodepool_hints
    from ..api.workloads import WORKLOAD_KINDS

    def labels(doc: dict, spec_path: str):
        meta = spec_path.rsplit(".", 1)[0] + ".metadata" if "." in spec_path else "metadata"
        found = get(doc, meta + ".labels")
        return found if isinstance(found, dict) else {}

    nodepools = [o.doc for o in result.objects if o.kind == "NodePool"]
    catalog = _catalog_values(result)
    return [issue for i, obj in enumerate(result.objects) if obj.kind in WORKLOAD_KINDS and obj.kind in POD_SPEC_PATHS
            for issue in _placed(result, i, pod_spec_hints(get(obj.doc, POD_SPEC_PATHS[obj.kind]),
                                                           POD_SPEC_PATHS[obj.kind],
                                                           labels(obj.doc, POD_SPEC_PATHS[obj.kind]), catalog)
                                 + nodepool_hints(get(obj.doc, POD_SPEC_PATHS[obj.kind]), POD_SPEC_PATHS[obj.kind],
                                                  nodepools))]


def nodepool_warnings(result: LoadResult) -> list[ValidationIssue]:
    """NodePool requirement values no node has (``api/nodepool_hints.py``): warnings, not errors."""
    from ..api.nodepool_hints import nodepool_requirement_hints

    catalog = _catalog_values(result)
    return [issue for i, obj in enumerate(result.objects) if obj.kind == "NodePool"
            for issue in _placed(result, i, nodepool_requirement_hints(obj.doc, catalog))]


def _catalog_values(result: LoadResult) -> dict:
    """{label key: values} of the instance type names the bundled catalog knows (type, family, size, category), and
    of the types a NodeOverlay in the files prices (``catalog.overlay.overlay_prices``: an unpriced type, such as a
    preview type the price table lacks, is usable at that price)."""
    from ..api.objects import NodeOverlay
    from ..catalog.instancetypes import label_values_of_names
    from ..catalog.overlay import overlay_prices
    from ..catalog.pricing import bundled_instance_type_names

    overlays = []
    for obj in result.objects:
        if obj.kind == "NodeOverlay":
            try:
                overlays.append(NodeOverlay(obj.doc))
            except Exception:  # noqa: BLE001 - an overlay validate refuses prices nothing
                continue
    return label_values_of_names([*bundled_instance_type_names(), *overlay_prices(overlays)])


def nodeclass_warnings(result: LoadResult) -> list[ValidationIssue]:
    """EC2NodeClasses whose alias names no release, or with an ssmParameter beside an alias or an id that is never
    read (``api/nodeclass_hints.py``): warnings, not errors."""
    from ..api.nodeclass_hints import nodeclass_hints

    return [issue for i, obj in enumerate(result.objects) if obj.kind == "EC2NodeClass"
            for issue in _placed(result, i, nodeclass_hints(obj.doc))]


def cross_warnings(result: LoadResult) -> list[ValidationIssue]:
    """Claims naming a StorageClass or volume the files do not have, when they have some, PodDisruptionBudgets
    selecting none of the workloads given (``api/crosscheck.py``), and workloads whose claims are in zones no node
    shares (``api/volume_zones.py``)."""
    from ..api.admission_hints import admission_warnings
    from ..api.crosscheck import pdb_warnings, storage_reference_warnings
    from ..api.volume_zones import volume_zone_warnings

    docs = [o.doc for o in result.objects]
    found = storage_reference_warnings(docs) + pdb_warnings(docs) + volume_zone_warnings(docs) + \
        admission_warnings(docs)
    return [issue for i, e in found for issue in _placed(result, i, [e])]


def input_warnings(result: LoadResult) -> list[ValidationIssue]:
    """What is valid but cannot do what it says, in ``validate``, ``plan`` and ``simulate`` alike: pod specs asking
    for labels no node has, one typo off the NodePools given or with terms selecting no pods, NodePool requirement
    values no node has, AMI aliases naming no release, claims of a StorageClass, volume or claim not given,
    PodDisruptionBudgets selecting none of the workloads given, claims in zones no node shares."""
    return pod_warnings(result) + nodepool_warnings(result) + nodeclass_warnings(result) + cross_warnings(result)


def print_warnings(result: LoadResult, out=None) -> None:
    """One line per warning (a v1beta1 object converted to v1, :func:`input_warnings`, a kind not read) on stderr:
    ``FILE:DOC: Kind/name: warning: ... (line N)``."""
    out = out or sys.stderr
    for w in result.warnings:
        out.write(format_issue(w, "warning") + "\n")


def note_unread(result: LoadResult) -> None:
    """The documents of a real API group's kind that nothing reads (a ConfigMap, a Secret, another project's custom
    resource) become warnings (``kind: not read: ... left out``), printed and listed in ``--json`` with the others."""
    result.warnings.extend(result.unread)


class SchedulerConfigFileError(Exception):
    """``--scheduler-config FILE`` cannot be read at all (missing, a directory, not UTF-8): a usage error."""


def read_scheduler_config_file(path: str) -> str:
    """The text of ``--scheduler-config FILE`` (validate, plan, simulate); SchedulerConfigFileError when it cannot
    be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise SchedulerConfigFileError(f"--scheduler-config {path}: no such file") from None
    except UnicodeDecodeError as e:
        raise SchedulerConfigFileError(f"--scheduler-config {path}: not UTF-8 text ({e.reason})") from None
    except OSError as e:
        raise SchedulerConfigFileError(f"--scheduler-config {path}: cannot read it: {e.strerror or e}") from None


def scheduler_config_issues(path: str, result: LoadResult) -> str | None:
    """``--scheduler-config FILE`` checked as the functions read ``KARPENTER_LAMBDA_SCHEDULER_CONFIG``
    (``api/scheduler_config.py``): each problem one error of ``result`` (``FILE:0: SchedulerConfig/-: field:
    message``).  Returns a usage problem (the file cannot be read), else None."""
    from ..api.scheduler_config import SchedulerConfigError, parse_scheduler_config

    try:
        text = read_scheduler_config_file(path)
    except SchedulerConfigFileError as e:
        return str(e)
    try:
        parse_scheduler_config(text, path)
    except SchedulerConfigError as e:
        for p in e.problems:
            field, _, message = p.partition(": ") if ": " in p and not p.startswith("not valid") else ("", "", p)
            result.issues.append(ValidationIssue(path, 0, "SchedulerConfig", "-", field, message or p))
    return None


def run(args: argparse.Namespace) -> int:
    args.files = list(args.files or []) + list(getattr(args, "more_files", None) or [])
    if not args.files:
        sys.stderr.write("validate: no input: give manifest files or directories (FILE... or -f FILE), or - for stdin\n")
        return 2
    try:
        result, files = load_inputs(args.files, accept_kinds=simulate_kinds(), version=kubernetes_version(args))
    except InputError as e:
        sys.stderr.write(f"validate: {e}\n")
        return 2
    found = content_issues(result)
    result.issues.extend(found)
    if found:   # an object simulate would refuse is not a valid one (counted and listed as such)
        bad = {(i.file, i.doc_index) for i in found}
        keep = [k for k, origin in enumerate(result.origins) if tuple(origin) not in bad]
        keep += list(range(len(result.origins), len(result.objects)))
        result.objects = [result.objects[k] for k in keep]
        result.origins = [result.origins[k] for k in keep if k < len(result.origins)]
        result._docs = [result._docs[k] for k in keep if k < len(result._docs)]   # line_of follows the objects
        files = [f for f, _ in result.origins]
    result.issues.extend(empty_inputs(args.files, result))
    note_unread(result)
    result.warnings.extend(input_warnings(result))
    if getattr(args, "scheduler_config", None):
        problem = scheduler_config_issues(args.scheduler_config, result)
        if problem is not None:
            sys.stderr.write(f"validate: {problem}\n")
            return 2
    cluster = known_cluster(args)  # its stack passes one node role: EC2NodeClasses naming another never launch
    if cluster:
        result.warnings.extend(node_role_warnings(result, cluster))
    if args.json:
        doc = {
            "valid": result.ok,
            "objects": [{"kind": o.kind, "name": o.name, "file": f} for o, f in zip(result.objects, files)],
            "errors": [i.to_dict() for i in result.issues],
            "skipped": [i.to_dict() for i in result.skipped],
            "warnings": [i.to_dict() for i in result.warnings],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0 if result.ok else 1
    print_warnings(result)
    for issue in result.skipped + result.issues:
        sys.stderr.write(format_issue(issue) + "\n")
    line = summary(result, files)
    (sys.stdout if result.ok else sys.stderr).write(line + "\n")
    return 0 if result.ok else 1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate", help="validate NodePool / EC2NodeClass / NodeClaim / OffPeakSchedule manifests and workloads (offline)",
        description="Validate Karpenter v1 manifests (v1beta1 converted, with a warning) with Karpenter's CRD rules, and "
                    "the workloads and Scenario simulate takes. Exit 0 valid, 1 invalid or empty, 2 usage.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="YAML/JSON file (multi-document), a directory, or - for stdin")
    p.add_argument("-f", "--filename", dest="more_files", action="append", default=[], metavar="FILE",
                   help="a manifest file or directory, as for plan and kubectl (repeatable; adds to the FILE arguments)")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout instead of text on stderr")
    p.add_argument("--kubernetes-version", metavar="MAJOR.MINOR", default=None,
                   help=f"check Kubernetes objects as this version's API server does (env {KUBERNETES_VERSION_ENV}; "
                        f"default {KUBERNETES_VERSION}, the simulated cluster's)")
    p.add_argument("--scheduler-config", dest="scheduler_config", metavar="FILE", default=None,
                   help="also check this scheduler config (YAML or JSON {podTopologySpread: {defaultConstraints: "
                        "[...]}}) as the functions read $KARPENTER_LAMBDA_SCHEDULER_CONFIG and plan/simulate "
                        "--scheduler-config")
    p.set_defaults(func=run)
