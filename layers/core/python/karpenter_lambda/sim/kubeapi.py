"""A small but real Kubernetes API server for tests and the simulator.

``KubeAPIServer().start()`` serves JSON over HTTP on 127.0.0.1 (a random free
port unless one is given) from a thread and returns its URL; the official
``kubernetes`` Python client talks to it with ``Configuration(host=url)`` and
no authentication.  ``.store`` gives the simulator direct, thread-safe access
to the same objects (no HTTP).

What it implements (JSON only, no protobuf, no auth, no admission chain):

* resources: core/v1 pods, nodes, namespaces, events, configmaps, services,
  persistentvolumeclaims, persistentvolumes; apps/v1 daemonsets, deployments,
  replicasets, statefulsets; policy/v1 poddisruptionbudgets; batch/v1 jobs;
  coordination.k8s.io/v1 leases; autoscaling/v2 horizontalpodautoscalers;
  keda.sh/v1alpha1 scaledobjects (KEDA's CRD, stored only: nothing acts on
  it, as no HPA controller acts on HPAs).  Every resource supports the same verbs.
* GET one / LIST (``labelSelector``: ``=``, ``==``, ``!=``, ``in``, ``notin``,
  ``key``, ``!key``; ``fieldSelector`` on any dotted field path such as
  ``spec.nodeName``, ``metadata.name``, ``status.phase`` with ``=``/``==``/``!=``;
  ``limit`` + ``continue`` paging), POST (201, ``generateName``), PUT
  (optimistic concurrency on ``metadata.resourceVersion``, 409 on conflict),
  PATCH (``merge-patch``, ``strategic-merge-patch`` with the merge keys of the
  common list fields, ``json-patch``), DELETE (finalizers: sets
  ``deletionTimestamp``; the object goes when its finalizers are emptied).
* subresources: ``status`` (GET/PUT/PATCH touch only ``.status``),
  ``pods/{name}/binding`` and ``namespaces/{ns}/bindings`` (sets
  ``spec.nodeName`` and ``PodScheduled=True``; 409 when already bound),
  ``pods/{name}/eviction`` (policy/v1; honours PodDisruptionBudgets with
  ``minAvailable``/``maxUnavailable``; 429 when a budget blocks),
  ``{deployments,statefulsets,replicasets}/{name}/scale`` (an autoscaling/v1
  ``Scale``: GET; PUT and PATCH change only the workload's ``spec.replicas``,
  with the workload's resourceVersion for optimistic concurrency).
* WATCH (``?watch=true``): chunked ``ADDED``/``MODIFIED``/``DELETED`` events
  after a resourceVersion (or the current state as ``ADDED`` when none is
  given), ``BOOKMARK`` events when asked, ``timeoutSeconds``; an ``ERROR``
  event with a 410 Status when the resourceVersion is older than the
  retained history (``history_size`` events; make it small to force 410).
* namespaces carry the ``kubernetes.io/metadata.name`` label (set on create and kept
  on every update, as the real API server does).
* uid, a global resourceVersion counter, creationTimestamp from an injectable
  ``clock`` (so the simulator's virtual clock is used).
* discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/{g}/{v}`` (listing the
  ``*/scale`` subresources),
  ``/healthz``, ``/readyz``, ``/livez``.
* test hooks: :meth:`KubeAPIServer.add_fault` (answer the next N matching
  requests with e.g. 429 or 500), :meth:`KubeAPIServer.drop_watches`
  (cut every open watch stream mid-flight), ``request_log``.

Simplifications (documented in docs/watcher.md): no graceful pod termination
(a pod without finalizers is deleted at once), no owner-reference garbage
collection except a namespace's contents, a watch with a selector does not
turn "object left the selector" into ``DELETED``, strategic merge knows the
merge keys by field name only.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import re
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "KubeAPIServer",
    "ObjectStore",
    "StoreError",
    "ResourceType",
    "RESOURCES",
    "parse_label_selector",
    "match_label_selector",
    "match_selector_object",
    "match_field_selector",
    "merge_patch",
    "strategic_merge_patch",
    "json_patch",
]


# --------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str  # "" for core
    version: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_RT = [
    ResourceType("pods", "Pod", "", "v1", True),
    ResourceType("nodes", "Node", "", "v1", False),
    ResourceType("namespaces", "Namespace", "", "v1", False),
    ResourceType("events", "Event", "", "v1", True),
    ResourceType("configmaps", "ConfigMap", "", "v1", True),
    ResourceType("services", "Service", "", "v1", True),
    ResourceType("persistentvolumeclaims", "PersistentVolumeClaim", "", "v1", True),
    ResourceType("persistentvolumes", "PersistentVolume", "", "v1", False),
    ResourceType("daemonsets", "DaemonSet", "apps", "v1", True),
    ResourceType("deployments", "Deployment", "apps", "v1", True),
    ResourceType("replicasets", "ReplicaSet", "apps", "v1", True),
    ResourceType("statefulsets", "StatefulSet", "apps", "v1", True),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True),
    ResourceType("jobs", "Job", "batch", "v1", True),
    ResourceType("leases", "Lease", "coordination.k8s.io", "v1", True),
    ResourceType("horizontalpodautoscalers", "HorizontalPodAutoscaler", "autoscaling", "v2", True),
    ResourceType("scaledobjects", "ScaledObject", "keda.sh", "v1alpha1", True),   # KEDA's CRD: stored, not acted on
]
RESOURCES: dict[str, ResourceType] = {r.plural: r for r in _RT}
_BY_GV: dict[tuple[str, str], dict[str, ResourceType]] = {}
for _r in _RT:
    _BY_GV.setdefault((_r.group, _r.version), {})[_r.plural] = _r
_KIND_TO_PLURAL = {r.kind: r.plural for r in _RT}
SCALABLE = ("deployments", "statefulsets", "replicasets")   # serve the autoscaling/v1 ``scale`` subresource
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class StoreError(Exception):
    """An API error: HTTP ``code``, Kubernetes ``reason`` and a message."""

    def __init__(self, code: int, reason: str, message: str, retry_after: int | None = None,
                 causes: list[dict] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.causes = causes

    def status(self) -> dict:
        out = _status(self.code, self.reason, self.message)
        if self.causes or self.retry_after is not None:
            out["details"] = {**({"causes": self.causes} if self.causes else {}),
                              **({"retryAfterSeconds": self.retry_after} if self.retry_after is not None else {})}
        return out


def _status(code: int, reason: str, message: str, success: bool = False) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


# --------------------------------------------------------------------------- selectors

_SET_RE = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(selector: str | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """Parse a label selector string into ``(key, op, values)`` terms.

    ``op`` is one of ``in``, ``notin``, ``exists``, ``!exists``.  Raises
    :class:`StoreError` (400) naming the bad term.
    """
    terms: list[tuple[str, str, tuple[str, ...]]] = []
    if not selector:
        return terms
    for part in _split_top(selector):
        m = _SET_RE.match(part)
        if m:
            vals = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            terms.append((m.group(1), m.group(2), vals))
        elif part.startswith("!"):
            terms.append((part[1:].strip(), "!exists", ()))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "notin", (v.strip(),)))
        elif "==" in part:
            k, v = part.split("==", 1)
            terms.append((k.strip(), "in", (v.strip(),)))
        elif "=" in part:
            k, v = part.split("=", 1)
            terms.append((k.strip(), "in", (v.strip(),)))
        elif re.match(r"^[A-Za-z0-9._/-]+$", part):
            terms.append((part, "exists", ()))
        else:
            raise StoreError(400, "BadRequest", f"unable to parse requirement {part!r} in labelSelector {selector!r}")
    return terms


def match_label_selector(terms, labels: dict | None) -> bool:
    labels = labels or {}
    for key, op, vals in terms:
        present = key in labels
        if op == "in" and (not present or labels[key] not in vals):
            return False
        if op == "notin" and present and labels[key] in vals:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
    return True


def match_selector_object(selector: dict | None, labels: dict | None) -> bool:
    """Match a ``metav1.LabelSelector`` dict (matchLabels + matchExpressions).

    ``None`` matches nothing (as for a PDB without a selector); ``{}`` matches everything.
    """
    if selector is None:
        return False
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _field_value(obj: dict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(selector: str | None) -> list[tuple[str, bool, str]]:
    out = []
    if not selector:
        return out
    for part in selector.split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), False, v.strip()))
        elif "==" in part:
            k, v = part.split("==", 1)
            out.append((k.strip(), True, v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), True, v.strip()))
        else:
            raise StoreError(400, "BadRequest", f"invalid fieldSelector term {part!r}: expected key=value or key!=value")
    return out


def match_field_selector(terms, obj: dict) -> bool:
    for path, eq, value in terms:
        if (_field_value(obj, path) == value) != eq:
            return False
    return True


# --------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``null`` deletes a key, lists are replaced)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# list fields merged by key under strategic merge patch (by field name, whatever the parent)
_SMP_MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "addresses": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}
_SMP_PRIMITIVE_MERGE = {"finalizers"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch, enough of it for the objects this server holds.

    Maps merge like a merge patch; the list fields in ``_SMP_MERGE_KEYS`` merge
    item by item on their key (``$patch: delete`` in an item removes it);
    ``finalizers`` merges as a set (remove with ``$deleteFromPrimitiveList/finalizers``);
    other lists are replaced.  ``$patch: replace`` on a map replaces it.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k == "$patch" or k.startswith("$setElementOrder/") or k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            key = k.split("/", 1)[1]
            if isinstance(out.get(key), list):
                out[key] = [x for x in out[key] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            if v.get("$patch") == "delete":
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), v)
        elif isinstance(v, list) and k in _SMP_MERGE_KEYS and isinstance(out.get(k), list):
            mk = _SMP_MERGE_KEYS[k]
            items = list(out[k])
            for item in v:
                if not isinstance(item, dict) or mk not in item:
                    items = copy.deepcopy(v)
                    break
                idx = next((i for i, cur in enumerate(items) if isinstance(cur, dict) and cur.get(mk) == item[mk]), None)
                if item.get("$patch") == "delete":
                    if idx is not None:
                        items.pop(idx)
                elif idx is None:
                    items.append({kk: copy.deepcopy(vv) for kk, vv in item.items() if kk != "$patch"})
                else:
                    items[idx] = strategic_merge_patch(items[idx], item)
            out[k] = items
        elif isinstance(v, list) and k in _SMP_PRIMITIVE_MERGE and isinstance(out.get(k), list):
            merged = list(out[k])
            for x in v:
                if x not in merged:
                    merged.append(x)
            out[k] = merged
        else:
            out[k] = copy.deepcopy(v)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise StoreError(422, "Invalid", f"json patch path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _jp_parent(doc: Any, parts: list[str], path: str):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")
    return cur


def _jp_get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")


def _jp_remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise StoreError(422, "Invalid", f"json patch remove: path {path!r} does not exist")


def _jp_add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _jp_parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise StoreError(422, "Invalid", f"json patch replace: path {path!r} does not exist")
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = copy.deepcopy(value)
            else:
                parent.insert(int(last), copy.deepcopy(value))
        else:
            raise StoreError(422, "Invalid", f"json patch: index in {path!r} out of range")
    else:
        raise StoreError(422, "Invalid", f"json patch path {path!r} does not exist")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise StoreError(400, "BadRequest", "json patch body must be a list of operations")
    doc = copy.deepcopy(target)
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StoreError(400, "BadRequest", f"json patch operation {i}: needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _jp_add(doc, path, op.get("value"))
        elif kind == "remove":
            _jp_remove(doc, path)
        elif kind == "replace":
            doc = _jp_add(doc, path, op.get("value"), replace=True)
        elif kind == "move":
            val = _jp_remove(doc, op["from"])
            doc = _jp_add(doc, path, val)
        elif kind == "copy":
            doc = _jp_add(doc, path, copy.deepcopy(_jp_get(doc, op["from"])))
        elif kind == "test":
            if _jp_get(doc, path) != op.get("value"):
                raise StoreError(422, "Invalid", f"json patch test failed at {path!r}")
        else:
            raise StoreError(400, "BadRequest", f"json patch operation {i}: unknown op {kind!r}")
    return doc


# --------------------------------------------------------------------------- store


def _to_epoch(value: Any) -> float:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    return float(value)


def format_time(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(int(epoch), tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Event:
    rv: int
    type: str
    plural: str
    namespace: str
    obj: dict


def _pod_healthy(pod: dict) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    conds = status.get("conditions") or []
    for c in conds:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return status.get("phase") == "Running"


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        raw = pct * total / 100
        return math.ceil(raw) if round_up else math.floor(raw)
    return int(value)


def selector_string(selector: dict | None) -> str:
    """A ``metav1.LabelSelector`` as the string syntax (``a=b,c in (d,e),!f``), as a Scale's ``status.selector``."""
    terms = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for e in (selector or {}).get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), ",".join(sorted(e.get("values") or []))
        terms.append({"In": f"{key} in ({vals})", "NotIn": f"{key} notin ({vals})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(op, ""))
    return ",".join(t for t in terms if t)


def _namespace_name_label(ns: dict) -> None:
    """The API server's immutable ``kubernetes.io/metadata.name`` label on every Namespace (so selectors can use it)."""
    meta = ns["metadata"]
    if not isinstance(meta.get("labels"), dict):
        meta["labels"] = {}
    meta["labels"]["kubernetes.io/metadata.name"] = meta["name"]


def _scale_of(obj: dict) -> dict:
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta},
        "spec": {"replicas": spec.get("replicas", 1)},
        "status": {"replicas": int((obj.get("status") or {}).get("replicas") or 0), "selector": selector_string(spec.get("selector"))},
    }


class ObjectStore:
    """Thread-safe in-memory objects with resourceVersions and a bounded event history.

    Every method takes the resource's plural (``"pods"``, ``"nodes"``, ...) and
    returns deep copies, so callers may mutate what they get.  Errors raise
    :class:`StoreError` (``code`` 404 NotFound, 409 AlreadyExists/Conflict, 422
    Invalid, 429 TooManyRequests for a blocked eviction).
    """

    def __init__(self, clock: Callable[[], Any] | None = None, history_size: int = 10000, strict_namespaces: bool = False,
                 uid_seed: str | None = None):
        self._clock = clock or time.time
        # With a seed, uids are uuid5(seed, kind/namespace/name#n): the same run gives the same uids
        # (the simulator uses this so NodeClaim names, derived from pod uids, repeat run to run).
        self.uid_seed = uuid.uuid5(uuid.NAMESPACE_URL, uid_seed) if uid_seed is not None else None
        self._creates = 0
        self.history_size = max(1, int(history_size))
        self.strict_namespaces = strict_namespaces
        self.mark_bound_pods_running = True
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self._objects: dict[str, dict[tuple[str, str], dict]] = {p: {} for p in RESOURCES}
        self._history: deque[_Event] = deque()
        self._rv = 0
        self.compacted_rv = 0  # events with rv <= this are gone from the history
        for ns in DEFAULT_NAMESPACES:
            self.create("namespaces", {"metadata": {"name": ns}})

    # -- helpers --------------------------------------------------------------------
    def now(self) -> float:
        return _to_epoch(self._clock())

    def now_str(self) -> str:
        return format_time(self.now())

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @staticmethod
    def rtype(plural: str) -> ResourceType:
        rt = RESOURCES.get(plural)
        if rt is None:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({plural})")
        return rt

    def _key(self, rt: ResourceType, name: str, namespace: str | None) -> tuple[str, str]:
        if rt.namespaced:
            return (namespace or "default", name)
        return ("", name)

    def _record(self, etype: str, rt: ResourceType, obj: dict) -> None:
        self._history.append(_Event(self._rv, etype, rt.plural, obj["metadata"].get("namespace", ""), copy.deepcopy(obj)))
        while len(self._history) > self.history_size:
            self.compacted_rv = self._history.popleft().rv
        self.cond.notify_all()

    def _bump(self, obj: dict) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    def compact(self) -> None:
        """Forget the whole event history (any watch from an older resourceVersion gets 410 Gone)."""
        with self.lock:
            self._history.clear()
            self.compacted_rv = self._rv
            self.cond.notify_all()

    # -- CRUD -----------------------------------------------------------------------
    def create(self, plural: str, obj: dict, namespace: str | None = None) -> dict:
        rt = self.rtype(plural)
        if not isinstance(obj, dict):
            raise StoreError(400, "BadRequest", f"{rt.kind} body must be a JSON object")
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise StoreError(422, "Invalid", f"{rt.kind}: metadata must be an object")
        with self.lock:
            if rt.namespaced:
                ns = meta.get("namespace") or namespace or "default"
                if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                    raise StoreError(400, "BadRequest", f"the namespace of the object ({meta['namespace']}) does not match the namespace on the request ({namespace})")
                meta["namespace"] = ns
                if ("", ns) not in self._objects["namespaces"]:
                    if self.strict_namespaces:
                        raise StoreError(404, "NotFound", f'namespaces "{ns}" not found')
                    self.create("namespaces", {"metadata": {"name": ns}})
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                else:
                    raise StoreError(422, "Invalid", f"{rt.kind}: metadata.name: Required value: name or generateName is required")
            name = meta["name"]
            if not isinstance(name, str) or len(name) > 253 or not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name):
                raise StoreError(422, "Invalid", f"{rt.kind} {name!r}: metadata.name: Invalid value: must be a lowercase RFC 1123 subdomain")
            key = self._key(rt, name, meta.get("namespace"))
            if key in self._objects[plural]:
                raise StoreError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            self._creates += 1
            if self.uid_seed is not None:
                meta["uid"] = str(uuid.uuid5(self.uid_seed, f"{plural}/{meta.get('namespace', '')}/{name}#{self._creates}"))
            else:
                meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = self.now_str()
            meta.pop("deletionTimestamp", None)
            meta.setdefault("generation", 1)
            if plural == "pods":
                spec = obj.setdefault("spec", {})
                spec.setdefault("schedulerName", "default-scheduler")
                spec.setdefault("priority", 0)
                status = obj.setdefault("status", {})
                status.setdefault("phase", "Pending")
            if plural == "namespaces":
                obj.setdefault("status", {}).setdefault("phase", "Active")
                _namespace_name_label(obj)
            self._bump(obj)
            self._objects[plural][key] = obj
            self._record("ADDED", rt, obj)
            return copy.deepcopy(obj)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        rt = self.rtype(plural)
        with self.lock:
            obj = self._objects[plural].get(self._key(rt, name, namespace))
            return copy.deepcopy(obj) if obj is not None else None

    def must_get(self, plural: str, name: str, namespace: str | None = None) -> dict:
        obj = self.get(plural, name, namespace)
        if obj is None:
            raise StoreError(404, "NotFound", f'{plural} "{name}" not found')
        return obj

    def list(self, plural: str, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        """Objects sorted by (namespace, name); selectors are the API's string syntax."""
        rt = self.rtype(plural)
        lterms = parse_label_selector(label_selector)
        fterms = parse_field_selector(field_selector)
        with self.lock:
            out = []
            for key in sorted(self._objects[plural]):
                if rt.namespaced and namespace and key[0] != namespace:
                    continue
                obj = self._objects[plural][key]
                if match_label_selector(lterms, obj["metadata"].get("labels")) and match_field_selector(fterms, obj):
                    out.append(copy.deepcopy(obj))
            return out

    def _store_modified(self, rt: ResourceType, key, new: dict) -> dict:
        """Save ``new`` (already holding the right identity) as MODIFIED, or finish a pending deletion."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._bump(new)
            del self._objects[rt.plural][key]
            self._record("DELETED", rt, new)
            return copy.deepcopy(new)
        self._bump(new)
        self._objects[rt.plural][key] = new
        self._record("MODIFIED", rt, new)
        return copy.deepcopy(new)

    def _identity(self, rt: ResourceType, old: dict, new: dict, check_rv: bool) -> dict:
        if not isinstance(new, dict):
            raise StoreError(422, "Invalid", f"{rt.kind}: the result must be an object")
        meta = new.get("metadata")
        if meta is None:
            meta = new["metadata"] = {}
        if not isinstance(meta, dict):
            raise StoreError(422, "Invalid", f"{rt.kind}: metadata must be an object")
        om = old["metadata"]
        if check_rv and meta.get("resourceVersion") and meta["resourceVersion"] != om["resourceVersion"]:
            raise StoreError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rt.plural} "{om["name"]}": the object has been modified; please apply your changes to the latest version and try again',
            )
        if meta.get("name") not in (None, om["name"]):
            raise StoreError(400, "BadRequest", f"{rt.kind}: metadata.name cannot be changed (was {om['name']!r})")
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in om:
                meta[k] = om[k]
        if om.get("deletionTimestamp"):
            meta["deletionTimestamp"] = om["deletionTimestamp"]
        elif "deletionTimestamp" in meta:
            meta.pop("deletionTimestamp")
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if rt.plural == "namespaces":
            _namespace_name_label(new)
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(om.get("generation", 1)) + 1
        return new

    def update(self, plural: str, obj: dict, namespace: str | None = None, subresource: str | None = None) -> dict:
        """PUT: replace the object (or only its status with ``subresource="status"``)."""
        rt = self.rtype(plural)
        name = ((obj or {}).get("metadata") or {}).get("name")
        with self.lock:
            key = self._key(rt, name or "", (obj.get("metadata") or {}).get("namespace") or namespace)
            old = self._objects[plural].get(key)
            if old is None:
                raise StoreError(404, "NotFound", f'{plural} "{name}" not found')
            if subresource == "status":
                new = copy.deepcopy(old)
                new["status"] = copy.deepcopy(obj.get("status") or {})
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    new["metadata"]["resourceVersion"] = rv
            else:
                new = copy.deepcopy(obj)
            new = self._identity(rt, old, new, check_rv=True)
            return self._store_modified(rt, key, new)

    def patch(self, plural: str, name: str, patch: Any, namespace: str | None = None, patch_type: str = "merge", subresource: str | None = None) -> dict:
        """PATCH with ``patch_type`` ``merge`` | ``strategic`` | ``json``."""
        rt = self.rtype(plural)
        with self.lock:
            key = self._key(rt, name, namespace)
            old = self._objects[plural].get(key)
            if old is None:
                raise StoreError(404, "NotFound", f'{plural} "{name}" not found')
            if patch_type == "json":
                new = json_patch(old, patch)
            elif patch_type == "strategic":
                if not isinstance(patch, dict):
                    raise StoreError(400, "BadRequest", "strategic merge patch body must be a JSON object")
                new = strategic_merge_patch(old, patch)
            elif patch_type == "merge":
                if not isinstance(patch, dict):
                    raise StoreError(400, "BadRequest", "merge patch body must be a JSON object")
                new = merge_patch(old, patch)
            else:
                raise StoreError(415, "UnsupportedMediaType", f"unsupported patch type {patch_type!r}")
            if subresource == "status":
                keep = copy.deepcopy(old)
                keep["status"] = new.get("status") or {}
                keep["metadata"]["resourceVersion"] = (new.get("metadata") or {}).get("resourceVersion", old["metadata"]["resourceVersion"])
                new = keep
            new = self._identity(rt, old, new, check_rv=True)
            return self._store_modified(rt, key, new)

    def delete(self, plural: str, name: str, namespace: str | None = None) -> dict:
        """Delete; with finalizers only mark ``deletionTimestamp``.  Returns the object's last state."""
        rt = self.rtype(plural)
        with self.lock:
            key = self._key(rt, name, namespace)
            old = self._objects[plural].get(key)
            if old is None:
                raise StoreError(404, "NotFound", f'{plural} "{name}" not found')
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return copy.deepcopy(old)
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = self.now_str()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._store_modified(rt, key, new)
            self._bump(old)
            del self._objects[plural][key]
            self._record("DELETED", rt, old)
            if plural == "namespaces":
                for p, objs in self._objects.items():
                    if RESOURCES[p].namespaced:
                        for k in [k for k in objs if k[0] == name]:
                            o = objs.pop(k)
                            self._bump(o)
                            self._record("DELETED", RESOURCES[p], o)
            return copy.deepcopy(old)

    # -- the scale subresource -------------------------------------------------------------
    def get_scale(self, plural: str, name: str, namespace: str | None = None) -> dict:
        """``{deployments,statefulsets,replicasets}/{name}/scale``: the workload as an autoscaling/v1 Scale."""
        if plural not in SCALABLE:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({plural}/scale)")
        return _scale_of(self.must_get(plural, name, namespace))

    def update_scale(self, plural: str, name: str, scale: Any, namespace: str | None = None, patch_type: str | None = None) -> dict:
        """PUT (``patch_type`` None: ``scale`` is the whole Scale) or PATCH the Scale; only ``spec.replicas`` reaches
        the workload.  A ``metadata.resourceVersion`` in the result must be the workload's (409 otherwise)."""
        rt = self.rtype(plural)
        with self.lock:
            cur = self.get_scale(plural, name, namespace)
            if patch_type is None:
                if not isinstance(scale, dict):
                    raise StoreError(400, "BadRequest", "Scale body must be a JSON object")
                new = copy.deepcopy(scale)
            elif patch_type == "json":
                new = json_patch(cur, scale)
            elif not isinstance(scale, dict):
                raise StoreError(400, "BadRequest", f"{patch_type} merge patch body must be a JSON object")
            else:
                new = (strategic_merge_patch if patch_type == "strategic" else merge_patch)(cur, scale)
            if not isinstance(new, dict) or not isinstance(new.get("spec") or {}, dict):
                raise StoreError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: the result must be an object with a spec')
            replicas = (new.get("spec") or {}).get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise StoreError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                                                 f"{json.dumps(replicas)}: must be an integer greater than or equal to 0")
            rv = (new.get("metadata") or {}).get("resourceVersion") if isinstance(new.get("metadata"), dict) else None
            obj = self.must_get(plural, name, namespace)
            if rv and rv != obj["metadata"]["resourceVersion"]:
                raise StoreError(409, "Conflict", f'Operation cannot be fulfilled on {rt.plural} "{name}": the object has been '
                                                  "modified; please apply your changes to the latest version and try again")
            if (obj.get("spec") or {}).get("replicas") != replicas:
                obj.setdefault("spec", {})["replicas"] = replicas
                key = self._key(rt, name, namespace)
                obj = self._store_modified(rt, key, self._identity(rt, self._objects[plural][key], obj, check_rv=False))
            return _scale_of(obj)

    # -- pod subresources ------------------------------------------------------------------
    def bind(self, namespace: str, name: str, node_name: str, mark_running: bool | None = None) -> dict:
        """``pods/{name}/binding``: set spec.nodeName and PodScheduled=True (409 when already bound).

        ``mark_running`` (default: the store's ``mark_bound_pods_running``) also makes the pod
        Running and Ready, standing in for the kubelet."""
        if mark_running is None:
            mark_running = self.mark_bound_pods_running
        if not node_name:
            raise StoreError(422, "Invalid", "Binding: target.name: Required value")
        with self.lock:
            pod = self.must_get("pods", name, namespace)
            cur = (pod.get("spec") or {}).get("nodeName")
            if cur:
                raise StoreError(409, "Conflict", f"pod {name} is already assigned to node \"{cur}\"")
            if pod["metadata"].get("deletionTimestamp"):
                raise StoreError(409, "Conflict", f"pod {name} is being deleted, cannot be assigned to a host")
            now = self.now_str()
            conds = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
            status: dict = {"conditions": conds}
            if mark_running:
                conds.append({"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
                status["phase"] = "Running"
                status["startTime"] = now
            return self.patch("pods", name, {"spec": {"nodeName": node_name}, "status": status}, namespace, "merge")

    def pdb_disruptions_allowed(self, pdb: dict) -> int:
        with self.lock:
            ns = pdb["metadata"].get("namespace", "default")
            sel = (pdb.get("spec") or {}).get("selector")
            pods = [p for p in self._objects["pods"].values() if p["metadata"]["namespace"] == ns and match_selector_object(sel, p["metadata"].get("labels"))]
            expected = len(pods)
            healthy = sum(1 for p in pods if _pod_healthy(p))
            spec = pdb.get("spec") or {}
            if spec.get("maxUnavailable") is not None:
                max_unavail = _scaled(spec["maxUnavailable"], expected, round_up=True)
                return max(0, max_unavail - (expected - healthy))
            if spec.get("minAvailable") is not None:
                return max(0, healthy - _scaled(spec["minAvailable"], expected, round_up=True))
            return max(0, healthy)  # neither set: nothing required

    def evict(self, namespace: str, name: str) -> dict:
        """policy/v1 Eviction: 429 when a PodDisruptionBudget would be violated, else delete the pod."""
        with self.lock:
            pod = self.must_get("pods", name, namespace)
            if pod["metadata"].get("deletionTimestamp"):
                return pod
            if _pod_healthy(pod):
                for pdb in self._objects["poddisruptionbudgets"].values():
                    if pdb["metadata"].get("namespace") != pod["metadata"]["namespace"]:
                        continue
                    if not match_selector_object((pdb.get("spec") or {}).get("selector"), pod["metadata"].get("labels")):
                        continue
                    if self.pdb_disruptions_allowed(pdb) <= 0:
                        # as the API server's eviction handler: the DisruptionBudget cause names the budget
                        # (APF throttling, by contrast, is a 429 with Retry-After and no cause: add_fault(429))
                        raise StoreError(
                            429,
                            "TooManyRequests",
                            f"Cannot evict pod as it would violate the pod's disruption budget {pdb['metadata']['name']}.",
                            retry_after=10,
                            causes=[{"reason": "DisruptionBudget",
                                     "message": f"The disruption budget {pdb['metadata']['name']} allows "
                                                f"{max(0, self.pdb_disruptions_allowed(pdb))} disruptions now"}],
                        )
            return self.delete("pods", name, namespace)

    # -- watch support -----------------------------------------------------------------------
    def events_after(self, rv: int) -> list[_Event] | None:
        """Events with resourceVersion > ``rv``; ``None`` when they are no longer retained (410)."""
        with self.lock:
            if rv < self.compacted_rv:
                return None
            out = []
            for ev in reversed(self._history):
                if ev.rv <= rv:
                    break
                out.append(ev)
            out.reverse()
            return out


# --------------------------------------------------------------------------- HTTP


_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    api: "KubeAPIServer"

    def handle_error(self, request, client_address):  # a client that went away is not worth a traceback
        import sys

        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr log
        pass

    def setup(self):
        super().setup()
        self.server.api._connections.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.api._connections.discard(self.connection)

    # every verb goes through one dispatcher
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    # -- plumbing --------------------------------------------------------------------------
    def _send_json(self, code: int, body: Any, headers: dict | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.server.api._log(self.command, self.path, code)   # before the reply: a client that got it sees it logged
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise StoreError(400, "BadRequest", f"request body is not valid JSON: {e}") from None

    def _dispatch(self, method: str) -> None:
        api = self.server.api
        try:
            fault = api._take_fault(method, self.path)
            if fault is not None:
                if method in ("POST", "PUT", "PATCH"):
                    self._read_body()
                headers = {"Retry-After": fault["retry_after"]} if fault.get("retry_after") is not None else None
                self._send_json(fault["status"], _status(fault["status"], fault["reason"], fault["message"]), headers)
                return
            self._route(method)
        except StoreError as e:
            headers = {"Retry-After": e.retry_after} if e.retry_after is not None else None
            self._send_json(e.code, e.status(), headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a bug in the server: answer 500 rather than hang the client
            try:
                self._send_json(500, _status(500, "InternalError", f"{type(e).__name__}: {e}"))
            except OSError:
                pass

    def _route(self, method: str) -> None:
        api = self.server.api
        store = api.store
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if method == "GET" and path in ("/healthz", "/readyz", "/livez"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(data)
            return
        if method == "GET" and path == "/version":
            self._send_json(200, api.version_info)
            return
        if method == "GET" and parts == ["api"]:
            self._send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
            return
        if method == "GET" and parts == ["apis"]:
            versions: dict[str, list[str]] = {}
            for g, v in _BY_GV:
                if g:
                    versions.setdefault(g, []).append(v)
            self._send_json(
                200,
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [
                        {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                         "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                        for g, vs in sorted(versions.items())
                    ],
                },
            )
            return
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        gv = _BY_GV.get((group, version))
        if gv is None:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if not rest:
            if method != "GET":
                raise StoreError(405, "MethodNotAllowed", "discovery is read-only")
            self._send_json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": [
                        {
                            "name": r.plural,
                            "singularName": r.kind.lower(),
                            "namespaced": r.namespaced,
                            "kind": r.kind,
                            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                        }
                        for r in gv.values()
                    ]
                    + [
                        {"name": f"{r.plural}/scale", "singularName": "", "namespaced": r.namespaced, "group": "autoscaling",
                         "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}
                        for r in gv.values() if r.plural in SCALABLE
                    ],
                },
            )
            return
        namespace = None
        if group == "" and rest[0] == "namespaces" and len(rest) >= 3 and rest[2] in gv and gv[rest[2]].namespaced:
            namespace, rest = rest[1], rest[2:]
        elif group and rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        rt = gv.get(plural)
        if rt is None or (group == "" and plural == "bindings"):
            if plural == "bindings" and namespace and method == "POST":
                body = self._read_body() or {}
                pod_name = (body.get("metadata") or {}).get("name")
                target = (body.get("target") or {}).get("name")
                store.bind(namespace, pod_name or "", target or "")
                self._send_json(201, body)
                return
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if rt.namespaced is False:
            namespace = None

        if name is None:
            if method == "GET":
                if q.get("watch") in ("true", "1"):
                    self._watch(rt, namespace, q)
                else:
                    self._list(rt, namespace, q)
                return
            if method == "POST":
                if rt.namespaced and not namespace:
                    raise StoreError(405, "MethodNotAllowed", f"create {rt.plural} needs a namespace in the path")
                obj = store.create(rt.plural, self._read_body(), namespace)
                self._send_json(201, obj)
                return
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on a collection")

        if sub == "binding" and rt.plural == "pods" and method == "POST":
            body = self._read_body() or {}
            target = (body.get("target") or {}).get("name")
            store.bind(namespace or "default", name, target or "")
            self._send_json(201, body)
            return
        if sub == "eviction" and rt.plural == "pods" and method == "POST":
            self._read_body()
            store.evict(namespace or "default", name)
            self._send_json(201, _status(201, "", "", success=True))
            return
        if sub == "scale" and rt.plural in SCALABLE:
            if method == "GET":
                self._send_json(200, store.get_scale(rt.plural, name, namespace))
            elif method in ("PUT", "PATCH"):
                ptype = None
                if method == "PATCH":
                    ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                    ptype = _PATCH_TYPES.get(ctype)
                    if ptype is None:
                        raise StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {', '.join(_PATCH_TYPES)}")
                self._send_json(200, store.update_scale(rt.plural, name, self._read_body(), namespace, ptype))
            else:
                raise StoreError(405, "MethodNotAllowed", f"{method} is not supported on {rt.plural}/scale")
            return
        if sub not in (None, "status"):
            raise StoreError(404, "NotFound", f"the server could not find the requested resource ({url.path})")
        if method == "GET":
            self._send_json(200, store.must_get(rt.plural, name, namespace))
        elif method == "PUT":
            body = self._read_body()
            if not isinstance(body, dict):
                raise StoreError(400, "BadRequest", "PUT body must be a JSON object")
            body.setdefault("metadata", {})
            if body["metadata"].get("name") not in (None, name):
                raise StoreError(400, "BadRequest", f"the name of the object ({body['metadata'].get('name')}) does not match the name on the URL ({name})")
            body["metadata"]["name"] = name
            if namespace:
                body["metadata"]["namespace"] = namespace
            self._send_json(200, store.update(rt.plural, body, namespace, subresource=sub))
        elif method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            ptype = _PATCH_TYPES.get(ctype)
            if ptype is None:
                raise StoreError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {', '.join(_PATCH_TYPES)}")
            self._send_json(200, store.patch(rt.plural, name, self._read_body(), namespace, ptype, subresource=sub))
        elif method == "DELETE":
            self._read_body()
            self._send_json(200, store.delete(rt.plural, name, namespace))
        else:
            raise StoreError(405, "MethodNotAllowed", f"{method} is not supported")

    def _list(self, rt: ResourceType, namespace: str | None, q: dict) -> None:
        store = self.server.api.store
        with store.lock:
            items = store.list(rt.plural, namespace, q.get("labelSelector"), q.get("fieldSelector"))
            rv = store.resource_version
        for it in items:
            it.pop("kind", None)
            it.pop("apiVersion", None)
        meta: dict = {"resourceVersion": str(rv)}
        limit = int(q.get("limit") or 0)
        cont = q.get("continue")
        if cont:
            try:
                start_after = json.loads(cont)
                items = [it for it in items if [it["metadata"].get("namespace", ""), it["metadata"]["name"]] > start_after]
            except (ValueError, TypeError, KeyError):
                raise StoreError(400, "BadRequest", f"invalid continue token {cont!r}") from None
        if limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = json.dumps([last.get("namespace", ""), last["name"]], separators=(",", ":"))
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        self._send_json(200, {"kind": rt.kind + "List", "apiVersion": rt.api_version, "metadata": meta, "items": items})

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, rt: ResourceType, namespace: str | None, q: dict) -> None:
        api = self.server.api
        store = api.store
        lterms = parse_label_selector(q.get("labelSelector"))
        fterms = parse_field_selector(q.get("fieldSelector"))
        timeout = float(q.get("timeoutSeconds") or api.default_watch_timeout)
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        rv_param = q.get("resourceVersion") or ""
        deadline = time.monotonic() + timeout
        generation = api._watch_generation

        def matches(obj: dict, ns: str) -> bool:
            if namespace and ns != namespace:
                return False
            return match_label_selector(lterms, obj["metadata"].get("labels")) and match_field_selector(fterms, obj)

        initial: list[tuple[str, dict]] = []
        gone = False
        with store.lock:
            if rv_param in ("", "0"):
                last = store.resource_version
                for obj in store.list(rt.plural, namespace):
                    if matches(obj, obj["metadata"].get("namespace", "")):
                        initial.append(("ADDED", obj))
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    raise StoreError(400, "BadRequest", f"invalid resourceVersion {rv_param!r}") from None
                gone = store.events_after(last) is None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        api._log("GET", self.path, 200)
        api._watch_count += 1

        def send(etype: str, obj: dict) -> None:
            self._chunk(json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n")

        def send_gone() -> None:
            send("ERROR", _status(410, "Expired", f"too old resource version: {last} ({store.compacted_rv + 1})"))

        try:
            if gone:
                send_gone()
            else:
                for etype, obj in initial:
                    send(etype, obj)
                last_bookmark = time.monotonic()
                while True:
                    with store.lock:
                        while True:
                            if api._stopping or api._watch_generation != generation:
                                break
                            evs = store.events_after(last)
                            if evs is None or evs:
                                break
                            left = deadline - time.monotonic()
                            if left <= 0:
                                break
                            store.cond.wait(min(left, 0.25))
                    if api._stopping or api._watch_generation != generation:
                        # cut the stream without the terminating chunk: the client sees a broken connection
                        self.close_connection = True
                        try:
                            self.connection.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass
                        return
                    if evs is None:
                        send_gone()
                        break
                    for ev in evs:
                        last = ev.rv
                        if ev.plural == rt.plural and matches(ev.obj, ev.namespace):
                            send(ev.type, ev.obj)
                    if time.monotonic() >= deadline:
                        break
                    if bookmarks and time.monotonic() - last_bookmark > api.bookmark_interval:
                        send("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(last)}})
                        last_bookmark = time.monotonic()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            api._watch_count -= 1


class KubeAPIServer:
    """In-process Kubernetes API server.  ``start()`` returns the URL; ``stop()`` ends it.

    ``clock``: callable returning epoch seconds (or a datetime) for timestamps.
    ``history_size``: watch events retained; older resourceVersions get 410 Gone.
    ``mark_bound_pods_running``: a binding also makes the pod Running and Ready
    (there is no kubelet here), so PDB arithmetic and "bound" checks work.
    """

    def __init__(
        self,
        port: int = 0,
        clock: Callable[[], Any] | None = None,
        history_size: int = 10000,
        strict_namespaces: bool = False,
        mark_bound_pods_running: bool = True,
        default_watch_timeout: float = 1800.0,
        bookmark_interval: float = 60.0,
        k8s_version: str = "1.31",
        uid_seed: str | None = None,
    ):
        self.port = port
        self.store = ObjectStore(clock=clock, history_size=history_size, strict_namespaces=strict_namespaces, uid_seed=uid_seed)
        self.store.mark_bound_pods_running = mark_bound_pods_running
        self.default_watch_timeout = default_watch_timeout
        self.bookmark_interval = bookmark_interval
        major, minor = k8s_version.split(".", 1)
        self.version_info = {
            "major": major,
            "minor": minor,
            "gitVersion": f"v{k8s_version}.0-karpenter-lambda-sim",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.23.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }
        self.request_log: deque[tuple[str, str, int]] = deque(maxlen=2000)
        self._faults: list[dict] = []
        self._fault_lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set = set()
        self._stopping = False
        self._watch_generation = 0
        self._watch_count = 0
        self.url: str | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> str:
        if self._httpd is not None:
            return self.url or ""
        self._stopping = False
        httpd = _Server(("127.0.0.1", self.port), _Handler)
        httpd.api = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"kubeapi-{self.port}", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping = True
        with self.store.lock:
            self.store.cond.notify_all()
        httpd.shutdown()
        for conn in list(self._connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "KubeAPIServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- test hooks ------------------------------------------------------------------------
    def add_fault(
        self,
        status: int = 500,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: int | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and the regex ``path`` with ``status``."""
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}.get(status, "InternalError")
        with self._fault_lock:
            self._faults.append(
                {
                    "status": status,
                    "times": times,
                    "method": method.upper() if method else None,
                    "path": re.compile(path) if path else None,
                    "retry_after": retry_after,
                    "reason": reason,
                    "message": message or f"injected fault {status}",
                }
            )

    def clear_faults(self) -> None:
        with self._fault_lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> dict | None:
        with self._fault_lock:
            for f in self._faults:
                if f["times"] <= 0:
                    continue
                if f["method"] and f["method"] != method:
                    continue
                if f["path"] and not f["path"].search(path):
                    continue
                f["times"] -= 1
                return f
            return None

    @property
    def mark_bound_pods_running(self) -> bool:
        return self.store.mark_bound_pods_running

    def drop_watches(self) -> None:
        """Cut every open watch stream (the client sees the connection break mid-stream)."""
        with self.store.lock:
            self._watch_generation += 1
            self.store.cond.notify_all()

    @property
    def open_watches(self) -> int:
        return self._watch_count

    def _log(self, method: str, path: str, code: int) -> None:
        self.request_log.append((method, path, code))

    def requests(self, method: str | None = None, path: str | None = None) -> list[tuple[str, str, int]]:
        """Logged requests, optionally filtered by method and a path regex."""
        rx = re.compile(path) if path else None
        return [r for r in list(self.request_log) if (method is None or r[0] == method) and (rx is None or rx.search(r[1]))]

    # -- convenience for the simulator -------------------------------------------------------
    def api_client(self):
        """An official ``kubernetes.client.ApiClient`` pointed at this server (no auth)."""
        from kubernetes import client as k8s

        cfg = k8s.Configuration(host=self.url)
        return k8s.ApiClient(cfg)

