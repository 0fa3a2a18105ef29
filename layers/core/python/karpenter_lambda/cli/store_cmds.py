"""`apply`, `get`, `delete`: the cluster's Karpenter objects in the DynamoDB state table.

All use the global ``--cluster``, ``--region`` and ``--endpoint-url`` (e.g. moto_server).
Exit codes: 0 ok, 1 a problem with the request (invalid manifest, object not found),
2 usage or environment (unknown kind, missing file, DynamoDB unreachable, table missing).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from datetime import datetime, timezone
from urllib.parse import urlparse

import yaml

from ..adapters import store as state_store   # names load on first use (pynamodb, botocore: ~0.4 s)
from ..adapters.store.errors import StoreError, StoreUnavailable
from ..api.times import to_datetime
from .table import render_table
from .validate import InputError, load_inputs, print_warnings

KIND_ORDER = ("EC2NodeClass", "NodePool", "NodeClaim", "OffPeakSchedule", "NodeOverlay")  # apply order: referred-to first
KIND_PLURAL = {"NodePool": "nodepools", "EC2NodeClass": "ec2nodeclasses", "NodeClaim": "nodeclaims",
               "OffPeakSchedule": "offpeakschedules", "NodeOverlay": "nodeoverlays"}
KIND_CHOICES_HELP = ("nodepools|ec2nodeclasses|nodeclaims|offpeakschedules|nodeoverlays "
                     "(or nodepool/np, ec2nodeclass/ec2nc, nodeclaim/nc, offpeakschedule/ops, nodeoverlay/overlays)")


def creates_table_on_first_use(endpoint_url: str | None) -> bool:
    """True for a custom, non-AWS endpoint (moto_server, DynamoDB Local, LocalStack): there the state table
    is created on first use.  Against AWS itself (no endpoint, or an ``*.amazonaws.com`` one) the stack owns
    the table and a missing one stays an error (exit 2): the name is probably not set
    (KARPENTER_LAMBDA_STATE_TABLE, a stack output)."""
    if not endpoint_url:
        return False
    host = (urlparse(endpoint_url).hostname or "").lower()
    return not (host.endswith(".amazonaws.com") or host.endswith(".amazonaws.com.cn"))


class UsageError(Exception):
    """A bad global option (cluster name, endpoint URL): exit 2 with the message."""


def open_store(args: argparse.Namespace, create_missing: bool = True):
    """The cluster's Store; on a custom non-AWS endpoint a missing state table is created (a note on stderr).

    Raises :class:`UsageError` for a cluster name the table key cannot hold or an endpoint that is no URL.
    """
    if args.endpoint_url is not None:
        url = urlparse(args.endpoint_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise UsageError(f"--endpoint-url {args.endpoint_url!r}: expected an http(s) URL such as http://127.0.0.1:5000")
    try:
        store = state_store.Store(args.cluster, region=args.region, endpoint_url=args.endpoint_url)
    except ValueError as e:
        raise UsageError(f"--cluster: {e}") from None
    if create_missing and creates_table_on_first_use(store.endpoint_url) and store.ensure_table():
        sys.stderr.write(f"table {store.table_name} created at {store.endpoint_url}\n")
    return store


def _store_errors(fn):
    """Store failures become a one-line message: environment problems exit 2, others 1."""

    @functools.wraps(fn)
    def wrapper(args):
        try:
            return fn(args)
        except UsageError as e:
            sys.stderr.write(f"error: {e}\n")
            return 2
        except StoreUnavailable as e:
            sys.stderr.write(f"error: {e}\n")
            return 2
        except StoreError as e:
            sys.stderr.write(f"error: {e}\n")
            return 1

    return wrapper


def cli_kind(text: str) -> str | None:
    """Canonical Karpenter kind for what a person typed, or None."""
    kind = state_store.resolve_kind(text)
    return kind if kind in KIND_PLURAL else None


# -- apply --------------------------------------------------------------------------------------
def _user_view(doc: dict) -> tuple:
    meta = doc.get("metadata") or {}
    return (doc.get("spec") or {}, meta.get("labels") or {}, meta.get("annotations") or {})


@_store_errors
def run_apply(args: argparse.Namespace) -> int:
    try:
        result, _ = load_inputs(args.files)
    except InputError as e:
        sys.stderr.write(f"apply: {e}\n")
        return 2
    print_warnings(result)  # v1beta1 objects converted to v1: one warning line each
    if result.issues:
        for issue in result.issues:
            sys.stderr.write(f"{issue}\n")
        sys.stderr.write(f"apply: nothing applied: {len(result.issues)} error(s) found; fix them and run again\n")
        return 1
    for note in result.skipped:
        sys.stderr.write(f"{note}\n")
    store = open_store(args, create_missing=not args.create_table)  # auto-creation notes go to stderr
    if args.create_table and store.ensure_table():
        sys.stdout.write(f"table {store.table_name} created\n")
    objs = sorted(result.objects, key=lambda o: KIND_ORDER.index(o.kind) if o.kind in KIND_ORDER else len(KIND_ORDER))
    refused, notes = _nodeclaim_checks(store, objs)
    refused += _nodepool_transitions(store, objs)
    for line in notes:
        sys.stderr.write(f"warning: {line}\n")
    if refused:
        for line in refused:
            sys.stderr.write(f"{line}\n")
        sys.stderr.write(f"apply: nothing applied: {len(refused)} error(s) found; fix them and run again\n")
        return 1
    for obj in objs:
        label = f"{obj.kind.lower()}/{obj.name}"
        current = store.get(obj.kind, obj.name)
        if obj.kind == "NodeClaim":
            sys.stdout.write(f"{label} {_apply_nodeclaim(store, obj, current)}\n")
            continue
        if current is not None and _user_view(current.doc) == _user_view(obj.doc):
            sys.stdout.write(f"{label} unchanged\n")
            continue
        store.apply(obj)
        sys.stdout.write(f"{label} {'created' if current is None else 'configured'}\n")
    return 0


def _nodepool_transitions(store, objs: list) -> list[str]:
    """Updates of stored NodePools the CRD refuses (``api/updates.py``): static <-> dynamic, nodeClassRef kind."""
    from ..api.updates import nodepool_update_errors

    out = []
    for obj in objs:
        current = store.get("NodePool", obj.name) if obj.kind == "NodePool" else None
        if current is not None:
            out += [f"nodepool/{obj.name}: {e.path}: {e.message}" for e in nodepool_update_errors(current.doc, obj.doc)]
    return out


def _nodeclaim_checks(store, objs: list) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the NodeClaims to apply, before anything is written.  Errors: a stored NodeClaim's spec
    changed (Karpenter's CRD: ``spec is immutable``).  Warnings: what keeps a new one from launching (a
    ``nodeClassRef`` that is not an EC2NodeClass, an EC2NodeClass neither stored nor in the files) or deletes it (a
    ``karpenter.sh/nodepool`` label naming no NodePool: the lifecycle sweep deletes the NodeClaims of a NodePool that
    does not exist)."""
    from ..controllers.manual_nodeclaims import nodeclass_name, nodeclass_ref_problem

    given = {(o.kind, o.name) for o in objs}
    errors, warnings = [], []
    for obj in objs:
        if obj.kind != "NodeClaim":
            continue
        current = store.get("NodeClaim", obj.name)
        if current is not None:
            if (current.doc.get("spec") or {}) != (obj.doc.get("spec") or {}):
                errors.append(f"nodeclaim/{obj.name}: spec is immutable (Karpenter's NodeClaim CRD): delete it and "
                              f"apply the new one, or give it another name")
            continue
        problem = nodeclass_ref_problem(obj)
        ref = nodeclass_name(obj)
        if problem:
            warnings.append(f"nodeclaim/{obj.name}: {problem}; it is stored but not launched")
        elif ("EC2NodeClass", ref) not in given and store.get("EC2NodeClass", ref) is None:
            warnings.append(f"nodeclaim/{obj.name}: EC2NodeClass {ref!r} is not stored: the lifecycle sweep deletes "
                            f"the NodeClaim (insufficient capacity, as Karpenter)")
        pool = obj.nodepool_name
        if pool and ("NodePool", pool) not in given and store.get("NodePool", pool) is None:
            warnings.append(f"nodeclaim/{obj.name}: karpenter.sh/nodepool {pool!r} names no stored NodePool: the "
                            f"lifecycle sweep deletes the NodeClaims of a NodePool that does not exist")
    return errors, warnings


def _apply_nodeclaim(store, obj, current) -> str:
    """A new NodeClaim is stored as a manual one (``controllers/manual_nodeclaims.requested``: no status, marked for
    the lifecycle sweep to launch).  A stored one keeps its spec (immutable, checked before) and everything the
    controllers wrote (status, finalizers, the launched instance's labels and annotations): the file's labels and
    annotations are merged over its own."""
    from ..controllers.manual_nodeclaims import requested

    if current is None:
        store.apply(requested(obj))
        return "created"
    labels, annotations = obj.labels, obj.annotations
    if all(current.labels.get(k) == v for k, v in labels.items()) and \
            all(current.annotations.get(k) == v for k, v in annotations.items()):
        return "unchanged"

    def merge(o):
        o.metadata["labels"] = {**o.labels, **labels}
        o.metadata["annotations"] = {**o.annotations, **annotations}
        return o

    store.update("NodeClaim", obj.name, merge)
    return "configured"


# -- get ------------------------------------------------------------------------------------------
def _age(ts: str | None, now: datetime) -> str:
    if not ts:
        return "<unknown>"
    then = to_datetime(ts)
    if then is None:
        return "<unknown>"
    s = max(0, int((now - then).total_seconds()))
    if s < 120:
        return f"{s}s"
    if s < 3600 * 2:
        return f"{s // 60}m"
    if s < 86400 * 2:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _condition(obj, kind: str) -> str | None:
    for c in (obj.doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c.get("status") or "Unknown"
    return None


def _ready(obj) -> str:
    return _condition(obj, "Ready") or "Unknown"


def _nodepool_ready(np, nodeclasses: dict | None) -> str:
    """A NodePool's own Ready condition when it has one; else, as Karpenter computes it (ValidationSucceeded and
    NodeClassReady), its EC2NodeClass's: False when that class is missing, the class's Ready otherwise."""
    own = _condition(np, "Ready")
    if own is not None:
        return own
    if nodeclasses is None:
        return "Unknown"
    nc = nodeclasses.get(np.node_class_ref.get("name"))
    return "False" if nc is None else _ready(nc)


def _budget(b: dict) -> str:
    """One disruption budget as YAML flow text: ``{nodes: 10%, reasons: [Drifted, Empty]}``."""
    return yaml.safe_dump(b, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _clock_now() -> datetime:
    """The CLI's now: the wall clock, or a saved simulation's own clock under ``--state DIR``."""
    from ..controllers import runtime
    return datetime.fromtimestamp(runtime.now(), timezone.utc)


def _kv(d: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in d.items()) if d else "-"


def _terms(terms: list[dict]) -> str:
    out = []
    for t in terms or []:
        if t.get("id"):
            out.append(t["id"])
        elif t.get("alias"):
            out.append(t["alias"])
        elif t.get("name"):
            out.append(f"name={t['name']}")
        elif t.get("tags"):
            out.append(_kv(t["tags"]))
        elif t.get("ssmParameter"):
            out.append(f"ssm={t['ssmParameter']}")
    return " | ".join(out) or "-"


def table_for(kind: str, objs: list, wide: bool = False, now: datetime | None = None,
              nodeclaims: list | None = None, nodeclasses: list | None = None) -> str:
    """The aligned table `get` prints (also used by `demo`).  ``now``: default the CLI's clock (a saved state's)."""
    now = now or _clock_now()
    classes = {c.name: c for c in nodeclasses} if nodeclasses is not None else None
    if kind == "NodePool":
        counts: dict[str, int] = {}
        for nc in nodeclaims or []:
            counts[nc.nodepool_name] = counts.get(nc.nodepool_name, 0) + 1
        headers = ["NAME", "NODECLASS", "WEIGHT", "LIMITS", "NODES", "READY", "AGE"]
        if wide:
            headers += ["CONSOLIDATION", "CONSOLIDATE-AFTER", "EXPIRE-AFTER", "BUDGETS"]
        rows = []
        for o in objs:
            row = [o.name, o.node_class_ref.get("name", "-"), o.spec.get("weight", "-"), _kv(o.limits),
                   counts.get(o.name, 0), _nodepool_ready(o, classes), _age(o.metadata.get("creationTimestamp"), now)]
            if wide:
                d = o.disruption
                row += [d.get("consolidationPolicy", "-"), d.get("consolidateAfter", "-"), o.expire_after,
                        " ".join(_budget(b) for b in d.get("budgets") or []) or "-"]
            rows.append(row)
        return render_table(headers, rows, right={2, 4})
    if kind == "EC2NodeClass":
        headers = ["NAME", "AMIS", "ROLE", "READY", "AGE"]
        if wide:
            headers += ["SUBNETS", "SECURITYGROUPS", "AMIFAMILY"]
        rows = []
        for o in objs:
            role = o.spec.get("role") or (f"profile:{o.spec['instanceProfile']}" if o.spec.get("instanceProfile") else "-")
            row = [o.name, _terms(o.spec.get("amiSelectorTerms")), role, _ready(o), _age(o.metadata.get("creationTimestamp"), now)]
            if wide:
                row += [_terms(o.spec.get("subnetSelectorTerms")), _terms(o.spec.get("securityGroupSelectorTerms")),
                        o.ami_family or "-"]
            rows.append(row)
        return render_table(headers, rows)
    if kind == "NodeClaim":
        headers = ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
        if wide:
            headers += ["NODEPOOL", "ID", "IMAGEID"]
        rows = []
        for o in objs:
            labels = o.labels
            status = o.doc.get("status") or {}
            row = [o.name, labels.get("node.kubernetes.io/instance-type", "-"), labels.get("karpenter.sh/capacity-type", "-"),
                   labels.get("topology.kubernetes.io/zone", "-"), status.get("nodeName", "-"), _ready(o),
                   _age(o.metadata.get("creationTimestamp"), now)]
            if wide:
                row += [o.nodepool_name or "-", status.get("providerID", "-"), status.get("imageID", "-")]
            rows.append(row)
        return render_table(headers, rows)
    if kind == "OffPeakSchedule":
        headers = ["NAME", "TIMEZONE", "SCHEDULE", "DURATION", "WORKLOADS", "NODEPOOLS"]
        if wide:
            headers += ["AGE"]
        rows = []
        for o in objs:
            row = [o.name, o.time_zone, o.schedule or "-", o.spec.get("duration", "-"),
                   _offpeak_workloads(o.spec.get("workloads")), _offpeak_nodepools(o.spec.get("nodePools"))]
            if wide:
                row.append(_age(o.metadata.get("creationTimestamp"), now))
            rows.append(row)
        return render_table(headers, rows)
    if kind == "NodeOverlay":
        headers = ["NAME", "WEIGHT", "PRICE", "CAPACITY", "REQUIREMENTS", "VALID", "AGE"]
        rows = []
        for o in objs:
            reqs = "; ".join(f"{r.get('key')} {r.get('operator')}" + (f" {','.join(map(str, r['values']))}" if r.get("values") else "")
                             for r in o.requirements) or "(all)"
            rows.append([o.name, o.spec.get("weight", 0), o.price_change or "-", _kv(o.capacity), reqs,
                         _condition(o, "ValidationSucceeded") or "Unknown", _age(o.metadata.get("creationTimestamp"), now)])
        return render_table(headers, rows, right={1})
    raise ValueError(f"no table for kind {kind}")


def _selector_text(sel: dict | None) -> str:
    if sel is None:
        return ""
    parts = [f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items()]
    parts += [f"{e.get('key')} {e.get('operator')}" + (f" ({','.join(map(str, e['values']))})" if e.get("values") else "")
              for e in sel.get("matchExpressions") or []]
    return ",".join(parts) or "{}"


def _offpeak_workloads(entries: list | None) -> str:
    """``dev,staging[tier=web]->0; ns(team=a)->1``: namespaces and/or namespace selector, [selector], ->replicas."""
    out = []
    for w in entries or []:
        where = ",".join(w.get("namespaces") or [])
        if w.get("namespaceSelector") is not None:
            where += ("&" if where else "") + "ns(" + _selector_text(w["namespaceSelector"]) + ")"
        sel = f"[{_selector_text(w['selector'])}]" if w.get("selector") is not None else ""
        out.append(f"{where or '*'}{sel}->{w.get('replicas', 0)}")
    return "; ".join(out) or "-"


def _offpeak_nodepools(entries: list | None) -> str:
    """``default(limits cpu=16; disruption), gpu(drain)``."""
    out = []
    for n in entries or []:
        what = []
        if n.get("drain"):
            what.append("drain")
        if n.get("limits"):
            what.append("limits " + _kv(n["limits"]))
        if n.get("disruption"):
            what.append("disruption")
        out.append(f"{n.get('name')}({'; '.join(what)})")
    return ", ".join(out) or "-"


@_store_errors
def run_get(args: argparse.Namespace) -> int:
    kind = cli_kind(args.kind)
    if kind is None:
        sys.stderr.write(f"get: unknown kind {args.kind!r}: use {KIND_CHOICES_HELP}\n")
        return 2
    store = open_store(args)
    if args.name:
        obj = store.get(kind, args.name)
        if obj is None:
            sys.stderr.write(f'error: {kind} "{args.name}" not found in cluster "{store.cluster}"\n')
            return 1
        objs = [obj]
    else:
        objs = store.list(kind)
    if args.output in ("json", "yaml"):
        doc = objs[0].to_dict() if args.name else {"apiVersion": "v1", "kind": "List", "items": [o.to_dict() for o in objs]}
        if args.output == "json":
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
        return 0
    if not objs:
        sys.stderr.write(f'No {KIND_PLURAL[kind]} found in cluster "{store.cluster}".\n')
        return 0
    claims = store.list("NodeClaim") if kind == "NodePool" else None
    classes = store.list("EC2NodeClass") if kind == "NodePool" else None
    sys.stdout.write(table_for(kind, objs, wide=args.output == "wide", nodeclaims=claims, nodeclasses=classes) + "\n")
    return 0


# -- delete ---------------------------------------------------------------------------------------
def _graceful_nodeclaim_delete(store, name: str) -> bool:
    """A NodeClaim with Karpenter's termination finalizer is marked deleting, as ``kubectl delete nodeclaim`` does:
    its node is drained (PodDisruptionBudgets, do-not-disrupt, ``terminationGracePeriod``) and its instance
    terminated by the lifecycle sweep, instead of the record vanishing and the instance being garbage-collected with
    its pods still on it.  False when there is no such NodeClaim (deleted outright, or not found, by the caller)."""
    from ..api.labels import TERMINATION_FINALIZER
    from ..controllers.termination import USER_DELETED, request_deletion

    nc = store.get("NodeClaim", name)
    if nc is None or TERMINATION_FINALIZER not in (nc.metadata.get("finalizers") or []):
        return False
    return request_deletion(store, name, USER_DELETED, time.time()) is not None


@_store_errors
def run_delete(args: argparse.Namespace) -> int:
    kind = cli_kind(args.kind)
    if kind is None:
        sys.stderr.write(f"delete: unknown kind {args.kind!r}: use {KIND_CHOICES_HELP}\n")
        return 2
    store = open_store(args)
    rc = 0
    for name in args.names:
        if kind == "NodeClaim" and _graceful_nodeclaim_delete(store, name):
            sys.stdout.write(f'{kind.lower()} "{name}" deleted (draining: the lifecycle sweep drains the node and '
                             f'terminates its instance)\n')
        elif store.delete(kind, name):
            sys.stdout.write(f'{kind.lower()} "{name}" deleted\n')
        else:
            sys.stderr.write(f'error: {kind} "{name}" not found in cluster "{store.cluster}"\n')
            rc = 1
    return rc


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "apply", help="validate manifests and store them (create or update) for the cluster",
        description="Validate every file first; if any object is invalid nothing is applied (exit 1).",
    )
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="YAML/JSON file, directory or - (stdin); repeat for several")
    p.add_argument("--create-table", action="store_true",
                   help="create the state table first if it does not exist (a new account; on a custom "
                        "non-AWS --endpoint-url such as moto_server this happens anyway)")
    p.set_defaults(func=run_apply)

    p = subparsers.add_parser("get", help="list or show stored objects",
                              description=f"KIND: {KIND_CHOICES_HELP}.")
    p.add_argument("kind", metavar="KIND", help=KIND_CHOICES_HELP)
    p.add_argument("name", nargs="?", metavar="NAME", help="one object (default: all of that kind)")
    p.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
                   help="table (default), wide (more columns), json or yaml (a List when NAME is omitted)")
    p.set_defaults(func=run_get)

    p = subparsers.add_parser("delete", help="delete stored objects", description=f"KIND: {KIND_CHOICES_HELP}.")
    p.add_argument("kind", metavar="KIND", help=KIND_CHOICES_HELP)
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=run_delete)
