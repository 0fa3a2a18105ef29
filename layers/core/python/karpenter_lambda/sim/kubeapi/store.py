"""The object store behind the local API server: objects, resourceVersions, the watch history, subresources.

Thread-safe and in memory; every method takes a resource's plural and returns deep copies (``list(..., shared=True)``:
the stored objects, to read only).  PodDisruptionBudgets
are counted by :mod:`karpenter_lambda.disruption.pdb` (the one rule the disruption sweeps use too).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ...api.admission import Admission
from ...api.selectors import Selector
from ...api.times import format_time, to_epoch
from ...disruption.pdb import MultiplePodDisruptionBudgets, blocking_pdb, disruptions_allowed
from .patches import json_patch, merge_patch, strategic_merge_patch
from .resources import DEFAULT_NAMESPACES, RESOURCES, SCALABLE, ResourceType, StoreError
from .selectors import match_field_selector, match_label_selector, parse_field_selector, parse_label_selector, selector_string


def _to_epoch(value: Any) -> float:
    epoch = to_epoch(value)
    if epoch is None:
        raise ValueError(f"the API server's clock gave {value!r}, not a time")
    return epoch


@dataclass
class _Event:
    rv: int
    type: str
    plural: str
    namespace: str
    obj: dict



def _fresh(obj: dict) -> dict:
    """A copy of a stored object whose metadata may be changed (a stored dict is never changed in place)."""
    return {**obj, "metadata": dict(obj["metadata"])}


def _namespace_name_label(ns: dict) -> None:
    """The API server's immutable ``kubernetes.io/metadata.name`` label on every Namespace (so selectors can use it)."""
    meta = ns["metadata"]
    if not isinstance(meta.get("labels"), dict):
        meta["labels"] = {}
    meta["labels"]["kubernetes.io/metadata.name"] = meta["name"]


# owner-reference garbage collection, for the dependents the simulated cluster has: a Node's CSINode (the kubelet
# makes the Node its owner); a PersistentVolumeClaim's owner Pod is collected by sim/storage.py (the ephemeral
# volume controller's claims), the rest of the garbage collector is not modelled
_GC_DEPENDENTS = {"nodes": ("csinodes",)}
#: plurals whose creates are numbered apart in seeded uids (``ObjectStore.create``): the workload controller's
#: ReplicaSets, added after the runs whose figures the docs give, so the other objects keep their uids
COUNTED_APART = ("replicasets",)
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


def default_storage_class(classes) -> str | None:
    """The name of the default StorageClass among ``classes`` (annotated ``is-default-class: "true"``; several:
    the newest, as the API server's DefaultStorageClass admission picks it), or None."""
    defaults = sorted((c for c in classes if any(((c.get("metadata") or {}).get("annotations") or {}).get(a) == "true"
                                                 for a in DEFAULT_CLASS_ANNOTATIONS)),
                      key=lambda c: ((c["metadata"].get("creationTimestamp") or ""), c["metadata"]["name"]))
    return defaults[-1]["metadata"]["name"] if defaults else None


def _validate_storage(rt: ResourceType, obj: dict) -> None:
    """The required fields the official client's models insist on (a list of them fails to deserialize otherwise)."""
    name = obj["metadata"].get("name")
    if rt.plural == "storageclasses" and not obj.get("provisioner"):
        raise StoreError(422, "Invalid", f'StorageClass.storage.k8s.io "{name}" is invalid: provisioner: Required value')
    if rt.plural == "csinodes":
        drivers = (obj.get("spec") or {}).get("drivers")
        if not isinstance(drivers, list) or not all(isinstance(d, dict) and d.get("name") and d.get("nodeID")
                                                    for d in drivers):
            raise StoreError(422, "Invalid", f'CSINode.storage.k8s.io "{name}" is invalid: spec.drivers: '
                                             "Required value: a list of drivers, each with name and nodeID")


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
        # the plurals of COUNTED_APART number their creates apart: objects added to the simulation later (the
        # Deployments' ReplicaSets) leave every other object's uid as it was
        self._creates_apart: dict[str, int] = {}
        self.history_size = max(1, int(history_size))
        self.strict_namespaces = strict_namespaces
        self.mark_bound_pods_running = True
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self._objects: dict[str, dict[tuple[str, str], dict]] = {p: {} for p in RESOURCES}
        self._history: deque[_Event] = deque()
        self._rv = 0
        self.compacted_rv = 0  # events with rv <= this are gone from the history
        self._changed_rv: dict[str, int] = {}  # plural -> the resourceVersion of its last change
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

    def last_change(self, plural: str) -> int:
        """The resourceVersion of the last create, update or delete of a ``plural`` object (0: none yet)."""
        with self.lock:
            return self._changed_rv.get(plural, 0)

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
        self._changed_rv[rt.plural] = self._rv
        while len(self._history) > self.history_size:
            self.compacted_rv = self._history.popleft().rv
        self.cond.notify_all()

    def _bump(self, obj: dict) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    @contextmanager
    def dry_run(self) -> Iterator[None]:
        """``dryRun=All``: what runs inside is validated and answered as if done, then undone under the lock, so no
        reader or watch sees it: no object changes, no event, no resourceVersion bump.

        Objects are never changed in place (every write stores a new dict), so a shallow copy of each plural's
        dict is the whole state to restore."""
        with self.lock:
            saved = ({p: dict(objs) for p, objs in self._objects.items()}, list(self._history), self._rv,
                     self.compacted_rv, dict(self._changed_rv), self._creates, dict(self._creates_apart))
            try:
                yield
            finally:
                (objects, history, self._rv, self.compacted_rv, self._changed_rv, self._creates,
                 self._creates_apart) = saved
                for p, objs in objects.items():
                    self._objects[p] = objs
                self._history = deque(history)

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
            if plural in COUNTED_APART:
                n = self._creates_apart[plural] = self._creates_apart.get(plural, 0) + 1
                tag = f"{plural}{n}"
            else:
                self._creates += 1
                tag = str(self._creates)
            if self.uid_seed is not None:
                meta["uid"] = str(uuid.uuid5(self.uid_seed, f"{plural}/{meta.get('namespace', '')}/{name}#{tag}"))
            else:
                meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = self.now_str()
            meta.pop("deletionTimestamp", None)
            meta.setdefault("generation", 1)
            if plural == "pods":
                # the mutating admission (api/admission.py): LimitRanger, Priority, RuntimeClass
                ranges: dict = {}
                for (ns, _), v in self._objects["limitranges"].items():
                    ranges.setdefault(ns, []).append(v)
                chain = Admission(ranges, {k[1]: v for k, v in self._objects["priorityclasses"].items()},
                                  {k[1]: v for k, v in self._objects["runtimeclasses"].items()})
                obj, problem = chain.admit(obj)
                if problem:
                    raise StoreError(403, "Forbidden", f'pods "{name}" is forbidden: {problem}')
                spec = obj.setdefault("spec", {})
                spec.setdefault("schedulerName", "default-scheduler")
                spec.setdefault("priority", 0)
                status = obj.setdefault("status", {})
                status.setdefault("phase", "Pending")
            if plural == "namespaces":
                obj.setdefault("status", {}).setdefault("phase", "Active")
                _namespace_name_label(obj)
            if plural in ("storageclasses", "csinodes"):
                _validate_storage(rt, obj)
            if plural == "persistentvolumeclaims":
                spec = obj.setdefault("spec", {})
                if isinstance(spec, dict) and "storageClassName" not in spec:   # DefaultStorageClass admission
                    default = default_storage_class(self._objects["storageclasses"].values())
                    if default:
                        spec["storageClassName"] = default
                obj.setdefault("status", {}).setdefault("phase", "Pending")
            if plural == "persistentvolumes":
                obj.setdefault("status", {}).setdefault("phase", "Pending")   # the PV controller makes it Available / Bound
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

    def list(self, plural: str, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None,
             *, shared: bool = False) -> list[dict]:
        """Objects sorted by (namespace, name); selectors are the API's string syntax.

        ``shared=True``: the stored objects themselves, not copies, for a caller that only reads them (the simulator's
        own passes, the LIST answer). They stay as they are: a write stores a new dict, never changes a stored one."""
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
                    out.append(obj if shared else copy.deepcopy(obj))
            return out

    def _store_modified(self, rt: ResourceType, key, new: dict) -> dict:
        """Save ``new`` (already holding the right identity) as MODIFIED, or finish a pending deletion."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._bump(new)
            del self._objects[rt.plural][key]
            self._record("DELETED", rt, new)
            self._collect_dependents(rt, new)
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
        if "managedFields" not in meta and "managedFields" in om:   # a write that omits them keeps them
            meta["managedFields"] = om["managedFields"]
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
            old = _fresh(old)
            self._bump(old)
            del self._objects[plural][key]
            self._record("DELETED", rt, old)
            self._collect_dependents(rt, old)
            if plural == "namespaces":
                for p, objs in self._objects.items():
                    if RESOURCES[p].namespaced:
                        for k in [k for k in objs if k[0] == name]:
                            o = _fresh(objs.pop(k))
                            self._bump(o)
                            self._record("DELETED", RESOURCES[p], o)
            return copy.deepcopy(old)

    def _collect_dependents(self, rt: ResourceType, owner: dict) -> None:
        """Delete what ``owner`` owns (``_GC_DEPENDENTS``), as the garbage collector would once the owner is gone."""
        uid = owner["metadata"].get("uid")
        for plural in _GC_DEPENDENTS.get(rt.plural, ()):
            for key, obj in list(self._objects[plural].items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("kind") == rt.kind and r.get("uid") == uid for r in refs if isinstance(r, dict)):
                    del self._objects[plural][key]
                    obj = _fresh(obj)
                    self._bump(obj)
                    self._record("DELETED", RESOURCES[plural], obj)

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
        """Evictions ``pdb`` allows now (:func:`karpenter_lambda.disruption.pdb.disruptions_allowed`: the budget's
        ``status.disruptionsAllowed`` when it has one, else computed from its spec, the namespace's pods and their
        controllers' replicas)."""
        with self.lock:
            ns = pdb["metadata"].get("namespace", "default")
            return disruptions_allowed(pdb, [p for p in self._objects["pods"].values() if p["metadata"]["namespace"] == ns],
                                       self._controller_scale)

    def _controller_scale(self, pod: dict) -> tuple[str, int] | None:
        """(the controller's key, its ``spec.replicas``) of ``pod``, as the disruption controller finds it: the pod's
        controller reference (a ReplicaSet owned by a Deployment, or whose name is a Deployment's plus the
        template hash and whose pods the Deployment selects, counts as that Deployment), None for a pod without one
        or whose controller is not an object here (a Job, a bare pod): it counts itself."""
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None:
            return None
        kind, name = ref.get("kind"), ref.get("name") or ""
        plural = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}.get(kind)
        if plural is None:
            return None
        obj = self._objects[plural].get((ns, name))
        if kind == "ReplicaSet":
            owner = next((r for r in ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
                          if r.get("controller") and r.get("kind") == "Deployment"), None)
            if owner is not None:
                kind, obj = "Deployment", self._objects["deployments"].get((ns, owner.get("name") or ""))
            elif obj is None:   # the Deployment's ReplicaSet, not an object of its own here
                head = name.rsplit("-", 1)[0]
                dep = self._objects["deployments"].get((ns, head)) if head != name else None
                sel = ((dep or {}).get("spec") or {}).get("selector")
                try:
                    ok = dep is not None and Selector(sel).matches(meta.get("labels") or {})
                except ValueError:
                    ok = False
                kind, obj = ("Deployment", dep) if ok else (kind, None)
        replicas = ((obj or {}).get("spec") or {}).get("replicas", 1) if obj is not None else None
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            return None
        return f"{kind}/{ns}/{(obj.get('metadata') or {}).get('name')}", replicas

    def evict(self, namespace: str, name: str) -> dict:
        """policy/v1 Eviction: 429 when a PodDisruptionBudget would be violated, else delete the pod."""
        with self.lock:
            pod = self.must_get("pods", name, namespace)
            if pod["metadata"].get("deletionTimestamp"):
                return pod
            ns = pod["metadata"]["namespace"]
            try:
                pdb = blocking_pdb(pod, [b for b in self._objects["poddisruptionbudgets"].values()
                                         if b["metadata"].get("namespace") == ns],
                                   [p for p in self._objects["pods"].values() if p["metadata"]["namespace"] == ns],
                                   self._controller_scale)
            except MultiplePodDisruptionBudgets as e:   # the API server's answer, whatever the budgets allow
                raise StoreError(500, "InternalError", f"Internal error occurred: {e}") from None
            if pdb is not None:
                # as the API server's eviction handler: the DisruptionBudget cause names the budget, and no
                # Retry-After (kubectl drain then retries every 5 s; APF throttling, by contrast, is a 429 with
                # Retry-After and no cause: add_fault(429))
                raise StoreError(
                    429,
                    "TooManyRequests",
                    f"Cannot evict pod as it would violate the pod's disruption budget {pdb['metadata']['name']}.",
                    causes=[{"reason": "DisruptionBudget",
                             "message": f"The disruption budget {pdb['metadata']['name']} allows "
                                        f"{max(0, self.pdb_disruptions_allowed(pdb))} disruptions now"}],
                )
            return self.delete("pods", name, namespace)

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


