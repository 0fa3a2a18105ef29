"""Kubernetes access for the Lambda functions: the official client, plain dicts out.

``KubeClient`` wraps ``kubernetes.client.ApiClient``.  Every call reads the raw
JSON (``_preload_content=False``): objects come back as plain Kubernetes dicts
(camelCase, as the rest of the project handles them), which is faster than the
client's pydantic models and never fails on fields the models do not know.

Requests go straight through the ``ApiClient`` (:func:`.rest.call`: the path, query, headers
and auth each generated method sends), not through the generated ``CoreV1Api``/``AppsV1Api``/...
classes, whose imports (they pull in the models) cost ~0.65 s per cold start and per simulator
run.  Those classes are still there, built on first use, as ``core``, ``apps``, ``policy``,
``autoscaling``, ``custom`` and ``storage`` for code outside this module that wants them.

Calls are retried on 429 and 5xx and on connection errors (bounded, capped
exponential backoff with jitter, honouring ``Retry-After``); other errors raise
:class:`KubeError` naming the operation, the object and the server's message.

Workloads for the off-peak function: Deployments/StatefulSets (list, get, merge patch,
and the ``scale`` subresource, as ``kubectl scale`` does, so an admission chain sees a
Scale and not a whole-object write), namespaces, autoscaling/v2 HorizontalPodAutoscalers
and KEDA ScaledObjects (``keda.sh/v1alpha1`` through CustomObjectsApi; a cluster without
the KEDA CRD answers 404, which :meth:`KubeClient.list_scaledobjects` turns into ``[]``).

Build one with :meth:`KubeClient.for_eks` (DescribeCluster + EKS token,
refreshed every 10 minutes), :meth:`KubeClient.from_endpoint` or
:meth:`KubeClient.from_host` (plain URL, no auth: tests and the simulator).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import random
import time
from typing import Any, Callable, Iterable

from ...api.times import format_time
from ...disruption.eviction import refused_by_budget
from . import rest
from .eks import get_cluster_info
from .token import TokenProvider

__all__ = ["KubeClient", "KubeError", "Conflict", "as_dict"]

log = logging.getLogger(__name__)

_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"
_STRATEGIC = "application/strategic-merge-patch+json"
_PATCH_TYPES = {"merge": _MERGE, "json": _JSON_PATCH, "strategic": _STRATEGIC}


# The resource paths (as the generated API methods spell them; ``{namespace}``/``{name}`` filled and quoted by the
# ApiClient).  A resource's collection is ``_ns(group, plural)`` in a namespace, ``_all(group, plural)`` everywhere,
# one object ``_ns(...) + "/{name}"``.
_CORE, _APPS, _POLICY, _AUTOSCALING, _STORAGE = "/api/v1", "/apis/apps/v1", "/apis/policy/v1", "/apis/autoscaling/v2", "/apis/storage.k8s.io/v1"
_NODE_API = "/apis/node.k8s.io/v1"


def _all(group: str, plural: str) -> str:
    return f"{group}/{plural}"


def _ns(group: str, plural: str) -> str:
    return f"{group}/namespaces/{{namespace}}/{plural}"


_NODE = _all(_CORE, "nodes") + "/{name}"
_POD = _ns(_CORE, "pods") + "/{name}"
_PV = _all(_CORE, "persistentvolumes") + "/{name}"
_PVC = _ns(_CORE, "persistentvolumeclaims") + "/{name}"
_CUSTOM_ALL = "/apis/{group}/{version}/{plural}"
_CUSTOM_NS = "/apis/{group}/{version}/namespaces/{namespace}/{plural}"

# workload kind -> its plural (apps/v1)
_WORKLOAD_API = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
KEDA_GROUP, KEDA_VERSION, KEDA_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
_KEDA = {"group": KEDA_GROUP, "version": KEDA_VERSION, "plural": KEDA_PLURAL}


def as_dict(obj) -> dict:
    """A Kubernetes object as a plain camelCase dict: the official client's models are converted, dicts (what
    :class:`KubeClient` returns) and None pass through."""
    if obj is None or isinstance(obj, dict):
        return obj
    from kubernetes.client import ApiClient   # deferred: ~0.6 s, and only models need it

    return ApiClient().sanitize_for_serialization(obj)


class KubeError(Exception):
    """A failed Kubernetes API call: ``status`` (0 for a connection failure), ``reason``, ``op``."""

    def __init__(self, op: str, status: int, reason: str, message: str, body: dict | None = None,
                 retry_after: str | None = None):
        super().__init__(f"{op}: {status or 'connection'} {reason}: {message}".rstrip(": "))
        self.op = op
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}              # the answer's Status object, when it sent one
        self.retry_after = retry_after      # the Retry-After header, when it sent one


class Conflict(KubeError):
    """409: the object changed under us (or already exists)."""


def _error_from(op: str, exc) -> KubeError:
    status = getattr(exc, "status", 0) or 0
    reason = getattr(exc, "reason", "") or ""
    message = ""
    body = getattr(exc, "body", None)
    doc: dict = {}
    if body:
        try:
            doc = json.loads(body)
            message = doc.get("message") or ""
            reason = doc.get("reason") or reason
        except (ValueError, AttributeError):
            doc = {}
            message = str(body)[:300]
    if not status:
        message = f"{type(exc).__name__}: {exc}"
    headers = getattr(exc, "headers", None) or {}
    retry_after = headers.get("Retry-After") if hasattr(headers, "get") else None
    cls = Conflict if status == 409 else KubeError
    return cls(op, status, str(reason), message, doc if isinstance(doc, dict) else {}, retry_after)


class KubeClient:
    def __init__(
        self,
        api_client,
        *,
        retries: int = 5,
        backoff_base: float = 0.2,
        backoff_cap: float = 5.0,
        request_timeout: float | tuple = (5, 30),
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.api_client = api_client
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.request_timeout = request_timeout
        self._sleep = sleep
        self.retried = 0  # how many retries this client made (for tests and metrics)

    # -- the generated API classes, for callers outside this module (built on first use: their imports are slow) --
    def _generated(self, name: str):
        api = self.__dict__.get(f"_{name}")
        if api is None:
            from kubernetes import client as k8s

            api = self.__dict__[f"_{name}"] = getattr(k8s, name)(self.api_client)
        return api

    core = property(lambda self: self._generated("CoreV1Api"), doc="``kubernetes.client.CoreV1Api`` (built on first use)")
    apps = property(lambda self: self._generated("AppsV1Api"), doc="``kubernetes.client.AppsV1Api`` (built on first use)")
    policy = property(lambda self: self._generated("PolicyV1Api"), doc="``kubernetes.client.PolicyV1Api`` (built on first use)")
    autoscaling = property(lambda self: self._generated("AutoscalingV2Api"),
                           doc="``kubernetes.client.AutoscalingV2Api`` (built on first use)")
    custom = property(lambda self: self._generated("CustomObjectsApi"), doc="``kubernetes.client.CustomObjectsApi`` (built on first use)")
    storage = property(lambda self: self._generated("StorageV1Api"), doc="``kubernetes.client.StorageV1Api`` (built on first use)")

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_host(cls, url: str, **kw) -> "KubeClient":
        """A client for a plain URL without authentication (the local API server)."""
        from kubernetes import client as k8s

        cfg = k8s.Configuration(host=url)
        cfg.retries = False  # retries are ours (bounded, counted); urllib3's would hide them
        return cls(k8s.ApiClient(cfg), **kw)

    @classmethod
    def from_endpoint(cls, endpoint: str, ca_data_b64: str | None, token: Callable[[], str] | str, **kw) -> "KubeClient":
        """A client for ``endpoint`` trusting the base64 PEM CA, with a bearer token (a string or a
        callable returning the current token, called before every request)."""
        from kubernetes import client as k8s

        cfg = k8s.Configuration(host=endpoint)
        cfg.retries = False
        if ca_data_b64:
            cfg.ca_cert_data = base64.b64decode(ca_data_b64).decode("ascii")
        cfg.api_key_prefix["BearerToken"] = "Bearer"
        if callable(token):
            cfg.api_key["BearerToken"] = token()
            cfg.refresh_api_key_hook = lambda c: c.api_key.__setitem__("BearerToken", token())
        else:
            cfg.api_key["BearerToken"] = token
        return cls(k8s.ApiClient(cfg), **kw)

    @classmethod
    def for_eks(cls, cluster: str, eks_client=None, session=None, region: str | None = None, **kw) -> "KubeClient":
        """DescribeCluster for endpoint + CA, then an EKS token that refreshes every 10 minutes."""
        if eks_client is None:
            import boto3

            session = session or boto3.Session()
            eks_client = session.client("eks", region_name=region)
        info = get_cluster_info(eks_client, cluster)
        provider = TokenProvider(cluster, region or eks_client.meta.region_name, session)
        return cls.from_endpoint(info.endpoint, info.ca_data_b64, provider.token, **kw)

    def close(self) -> None:
        self.api_client.close()

    # -- the retry loop -------------------------------------------------------------------
    def _call(self, op: str, fn, *args, retry_429: bool = True, **kw) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kw["_preload_content"] = False
        kw.setdefault("_request_timeout", self.request_timeout)
        attempt = 0
        while True:
            try:
                resp = fn(*args, **kw)
                try:
                    data = resp.data
                finally:
                    resp.release_conn()
                return json.loads(data) if data else {}
            except ApiException as e:
                retryable = (e.status == 429 and retry_429) or (e.status or 0) >= 500
                if not retryable or attempt >= self.retries:
                    raise _error_from(op, e) from None
                delay = self._delay(attempt, e)
            except (HTTPError, OSError) as e:
                if attempt >= self.retries:
                    raise _error_from(op, e) from None
                delay = self._delay(attempt, None)
            attempt += 1
            self.retried += 1
            log.debug("retrying %s in %.2fs (attempt %d)", op, delay, attempt)
            self._sleep(delay)

    def _delay(self, attempt: int, exc) -> float:
        delay = random.uniform(0, min(self.backoff_cap, self.backoff_base * 2**attempt))
        headers = getattr(exc, "headers", None) or {}
        ra = headers.get("Retry-After") if hasattr(headers, "get") else None
        if ra:
            try:
                delay = min(self.backoff_cap, max(delay, float(ra)))
            except ValueError:
                pass
        return delay

    def _request(self, method: str, path: str, path_params: dict | None = None, query: list | None = None,
                 body: Any = None, content_type: str | None = None) -> Callable:
        """The ``fn`` for :meth:`_call`: one request as the generated API method sends it (:func:`.rest.call`)."""
        return functools.partial(rest.call, self.api_client, method, path, path_params, query or (), body, content_type)

    def _list_all(self, op: str, path: str, path_params: dict | None = None, label_selector: str | None = None,
                  field_selector: str | None = None) -> list[dict]:
        """Every item of a collection, 500 a page, following ``continue`` tokens."""
        items: list[dict] = []
        token = None
        while True:
            query = [("continue", token)] if token else []   # in the generated methods' order
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if label_selector:
                query.append(("labelSelector", label_selector))
            query.append(("limit", 500))
            doc = self._call(op, self._request("GET", path, path_params, query))
            items.extend(doc.get("items") or [])
            token = (doc.get("metadata") or {}).get("continue")
            if not token:
                return items

    def _list(self, op: str, group: str, plural: str, namespace: str | None = None, label_selector: str | None = None,
              field_selector: str | None = None) -> list[dict]:
        """``LIST plural`` everywhere, or ``-n namespace``."""
        if namespace:
            return self._list_all(f"{op} -n {namespace}", _ns(group, plural), {"namespace": namespace}, label_selector, field_selector)
        return self._list_all(op, _all(group, plural), None, label_selector, field_selector)

    # -- reads ----------------------------------------------------------------------------
    def version(self) -> dict:
        return self._call("GET /version", self._request("GET", "/version/"))

    def list_pods(self, namespace: str | None = None, label_selector: str | None = None, field_selector: str | None = None) -> list[dict]:
        return self._list("LIST pods", _CORE, "pods", namespace, label_selector, field_selector)

    def list_pods_on_node(self, node_name: str) -> list[dict]:
        return self.list_pods(field_selector=f"spec.nodeName={node_name}")

    def get_pod(self, namespace: str, name: str) -> dict | None:
        return self._get(f"GET pods {namespace}/{name}", self._request("GET", _POD, {"namespace": namespace, "name": name}))

    def list_nodes(self, label_selector: str | None = None) -> list[dict]:
        return self._list("LIST nodes", _CORE, "nodes", label_selector=label_selector)

    def get_node(self, name: str) -> dict | None:
        return self._get(f"GET nodes/{name}", self._request("GET", _NODE, {"name": name}))

    def list_daemonsets(self, namespace: str | None = None) -> list[dict]:
        return self._list("LIST daemonsets", _APPS, "daemonsets", namespace)

    def list_pdbs(self, namespace: str | None = None) -> list[dict]:
        return self._list("LIST poddisruptionbudgets", _POLICY, "poddisruptionbudgets", namespace)

    # -- storage (volume topology and attach limits: scheduling/volumes.py) -----------------------
    def list_pvcs(self) -> list[dict]:
        return self._list("LIST persistentvolumeclaims", _CORE, "persistentvolumeclaims")

    def list_pvs(self) -> list[dict]:
        return self._list("LIST persistentvolumes", _CORE, "persistentvolumes")

    def list_storageclasses(self) -> list[dict]:
        return self._list("LIST storageclasses", _STORAGE, "storageclasses")

    def list_csinodes(self) -> list[dict]:
        return self._list("LIST csinodes", _STORAGE, "csinodes")

    def create_pv(self, pv: dict) -> dict:
        """Create a PersistentVolume (the simulator's volume provisioning)."""
        return self._call(f"CREATE persistentvolumes/{(pv.get('metadata') or {}).get('name')}",
                          self._request("POST", _all(_CORE, "persistentvolumes"), body=pv))

    def create_pvc(self, namespace: str, pvc: dict) -> dict:
        return self._call(f"CREATE persistentvolumeclaims {namespace}/{(pvc.get('metadata') or {}).get('name')}",
                          self._request("POST", _ns(_CORE, "persistentvolumeclaims"), {"namespace": namespace}, body=pvc))

    def patch_pv(self, name: str, patch: dict, subresource: str | None = None) -> dict:
        """Merge patch a PersistentVolume, or its ``status`` subresource."""
        sub = "/status" if subresource == "status" else ""
        return self._call(f"PATCH persistentvolumes/{name}{sub}",
                          self._request("PATCH", _PV + sub, {"name": name}, body=patch, content_type=_MERGE))

    def patch_pvc(self, namespace: str, name: str, patch: dict, subresource: str | None = None) -> dict:
        """Merge patch a PersistentVolumeClaim, or its ``status`` subresource."""
        sub = "/status" if subresource == "status" else ""
        return self._call(f"PATCH persistentvolumeclaims {namespace}/{name}{sub}",
                          self._request("PATCH", _PVC + sub, {"namespace": namespace, "name": name}, body=patch,
                                        content_type=_MERGE))

    # -- what the API server's admission gives a pod (a DaemonSet without a pod yet: controllers/snapshot.py) -------
    # List items carry no ``apiVersion``/``kind`` (as the API returns them).
    def list_runtimeclasses(self) -> list[dict]:
        return self._list("LIST runtimeclasses", _NODE_API, "runtimeclasses")

    def list_limitranges(self, namespace: str | None = None) -> list[dict]:
        return self._list("LIST limitranges", _CORE, "limitranges", namespace)

    def list_namespaces(self, label_selector: str | None = None) -> list[dict]:
        return self._list("LIST namespaces", _CORE, "namespaces", label_selector=label_selector)

    # -- what selects a pod (the default topology spread's selector: scheduling/default_spread.py) -------
    # All namespaces; list items carry no ``apiVersion``/``kind`` (as the API returns them).
    def list_services(self) -> list[dict]:
        return self._list("LIST services", _CORE, "services")

    def list_replicationcontrollers(self) -> list[dict]:
        return self._list("LIST replicationcontrollers", _CORE, "replicationcontrollers")

    def list_replicasets(self) -> list[dict]:
        return self._list("LIST replicasets", _APPS, "replicasets")

    # -- workloads (Deployments, StatefulSets) and their autoscalers ---------------------------
    def _workload_api(self, kind: str) -> str:
        plural = _WORKLOAD_API.get(kind)
        if plural is None:
            raise ValueError(f"workload kind must be one of {sorted(_WORKLOAD_API)}, not {kind!r}")
        return plural

    def _list_workloads(self, kind: str, namespace: str | None, label_selector: str | None) -> list[dict]:
        plural = self._workload_api(kind)
        return self._list(f"LIST {plural}", _APPS, plural, namespace, label_selector)

    def list_deployments(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        """apps/v1 Deployments (list items carry no ``kind``, as the API returns them)."""
        return self._list_workloads("Deployment", namespace, label_selector)

    def list_statefulsets(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self._list_workloads("StatefulSet", namespace, label_selector)

    def get_workload(self, kind: str, namespace: str, name: str) -> dict | None:
        """A Deployment or StatefulSet (``kind``); None when it does not exist."""
        plural = self._workload_api(kind)
        return self._get(f"GET {plural} {namespace}/{name}",
                         self._request("GET", _ns(_APPS, plural) + "/{name}", {"namespace": namespace, "name": name}))

    def scale_workload(self, kind: str, namespace: str, name: str, replicas: int) -> dict:
        """Set ``spec.replicas`` through the ``scale`` subresource (merge patch); returns the autoscaling/v1 Scale.

        A workload that does not exist raises :class:`KubeError` (404) naming it."""
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ValueError(f"replicas must be an integer >= 0, not {replicas!r}")
        plural = self._workload_api(kind)
        return self._call(f"PATCH {plural} {namespace}/{name}/scale",
                          self._request("PATCH", _ns(_APPS, plural) + "/{name}/scale", {"namespace": namespace, "name": name},
                                        body={"spec": {"replicas": replicas}}, content_type=_MERGE))

    def patch_workload(self, kind: str, namespace: str, name: str, patch: dict) -> dict:
        """Merge patch a Deployment or StatefulSet (e.g. ``{"metadata": {"annotations": {k: v or None}}}``)."""
        plural = self._workload_api(kind)
        return self._call(f"PATCH {plural} {namespace}/{name}",
                          self._request("PATCH", _ns(_APPS, plural) + "/{name}", {"namespace": namespace, "name": name},
                                        body=patch, content_type=_MERGE))

    def list_hpas(self, namespace: str | None = None) -> list[dict]:
        """autoscaling/v2 HorizontalPodAutoscalers."""
        return self._list("LIST horizontalpodautoscalers", _AUTOSCALING, "horizontalpodautoscalers", namespace)

    def patch_hpa(self, namespace: str, name: str, patch: dict) -> dict:
        return self._call(f"PATCH horizontalpodautoscalers {namespace}/{name}",
                          self._request("PATCH", _ns(_AUTOSCALING, "horizontalpodautoscalers") + "/{name}",
                                        {"namespace": namespace, "name": name}, body=patch, content_type=_MERGE))

    def list_scaledobjects(self, namespace: str | None = None) -> list[dict]:
        """KEDA ScaledObjects (keda.sh/v1alpha1); ``[]`` when the cluster has no such resource (404: KEDA not installed)."""
        try:
            if namespace:
                return self._list_all(f"LIST scaledobjects.keda.sh -n {namespace}", _CUSTOM_NS, {**_KEDA, "namespace": namespace})
            return self._list_all("LIST scaledobjects.keda.sh", _CUSTOM_ALL, dict(_KEDA))
        except KubeError as e:
            if e.status == 404:
                return []
            raise

    def patch_scaledobject(self, namespace: str, name: str, patch: dict) -> dict:
        """Merge patch a KEDA ScaledObject (e.g. the ``autoscaling.keda.sh/paused-replicas`` annotation)."""
        return self._call(f"PATCH scaledobjects.keda.sh {namespace}/{name}",
                          self._request("PATCH", _CUSTOM_NS + "/{name}", {**_KEDA, "namespace": namespace, "name": name},
                                        body=patch, content_type=_MERGE))

    def _get(self, op: str, fn, *args) -> dict | None:
        try:
            return self._call(op, fn, *args)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    # -- writes ---------------------------------------------------------------------------
    def create_node(self, node: dict) -> dict:
        return self._call(f"CREATE nodes/{node.get('metadata', {}).get('name')}", self._request("POST", _all(_CORE, "nodes"), body=node))

    def create_pod(self, pod: dict) -> dict:
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        return self._call(f"CREATE pods {ns}/{pod.get('metadata', {}).get('name')}", self._request("POST", _ns(_CORE, "pods"), {"namespace": ns}, body=pod))

    def patch_node(self, name: str, patch: dict | list, patch_type: str = "merge") -> dict:
        """PATCH a node: ``patch_type`` ``merge`` (default), ``strategic`` or ``json``."""
        ctype = _PATCH_TYPES.get(patch_type)
        if ctype is None:
            raise ValueError(f"patch_type must be one of {sorted(_PATCH_TYPES)}, not {patch_type!r}")
        return self._call(f"PATCH nodes/{name}", self._request("PATCH", _NODE, {"name": name}, body=patch, content_type=ctype))

    def patch_node_status(self, name: str, patch: dict) -> dict:
        return self._call(f"PATCH nodes/{name}/status", self._request("PATCH", _NODE + "/status", {"name": name}, body=patch, content_type=_MERGE))

    def patch_pod_status(self, namespace: str, name: str, patch: dict) -> dict:
        return self._call(f"PATCH pods {namespace}/{name}/status",
                          self._request("PATCH", _POD + "/status", {"namespace": namespace, "name": name}, body=patch,
                                        content_type=_STRATEGIC))

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict:
        """Set labels (a ``None`` value removes the label)."""
        return self.patch_node(name, {"metadata": {"labels": labels}})

    def patch_node_annotations(self, name: str, annotations: dict[str, str | None]) -> dict:
        return self.patch_node(name, {"metadata": {"annotations": annotations}})

    def update_node(self, name: str, change: Callable[[dict], dict | None], attempts: int = 5) -> dict | None:
        """Optimistic-lock update: read the node, ``change(node)`` returns a merge patch computed from what was read
        (or None: nothing to do), PATCH it with that read's ``metadata.resourceVersion``; on 409 Conflict read again
        and retry.  None when the node is gone."""
        return self._update_node(name, change, f"PATCH nodes/{name}", attempts)

    def _update_node(self, name: str, change: Callable[[dict], dict | None], op: str, attempts: int = 5) -> dict | None:
        """Read-modify-write guarded by resourceVersion (retried on 409).  ``change`` returns the
        merge patch to apply, or None when nothing needs doing.  None when the node is gone."""
        for _ in range(attempts):
            node = self.get_node(name)
            if node is None:
                return None
            patch = change(node)
            if patch is None:
                return node
            patch.setdefault("metadata", {})["resourceVersion"] = node["metadata"]["resourceVersion"]
            try:
                return self.patch_node(name, patch)
            except Conflict:
                continue
        raise KubeError(op, 409, "Conflict", f"node {name} kept changing; gave up after {attempts} attempts")

    def patch_node_taints(self, name: str, add: Iterable[dict] = (), remove: Iterable[dict | str] = ()) -> dict | None:
        """Add taints (replacing one with the same key+effect) and remove taints (dicts by key+effect, or bare keys)."""
        add = [dict(t) for t in add]
        for t in add:
            if not t.get("key") or t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise ValueError(f"taint {t!r}: needs key and effect NoSchedule|PreferNoSchedule|NoExecute")
        rm_keys = {t for t in remove if isinstance(t, str)}
        rm_pairs = {(t.get("key"), t.get("effect")) for t in remove if isinstance(t, dict)}
        add_pairs = {(t["key"], t["effect"]) for t in add}

        def change(node: dict) -> dict | None:
            cur = (node.get("spec") or {}).get("taints") or []
            keep = [
                t
                for t in cur
                if t.get("key") not in rm_keys and (t.get("key"), t.get("effect")) not in rm_pairs and (t.get("key"), t.get("effect")) not in add_pairs
            ]
            new = keep + add
            if new == cur:
                return None
            return {"spec": {"taints": new or None}}

        return self._update_node(name, change, f"PATCH nodes/{name} taints")

    def cordon(self, name: str, unschedulable: bool = True) -> dict:
        return self.patch_node(name, {"spec": {"unschedulable": True if unschedulable else None}})

    def uncordon(self, name: str) -> dict:
        return self.cordon(name, False)

    def remove_finalizer(self, kind: str, name: str, finalizer: str, namespace: str | None = None) -> dict | None:
        """Remove ``finalizer`` from a node or pod (``kind`` ``nodes``/``pods``); None when the object is gone."""
        for _ in range(5):
            if kind == "nodes":
                obj = self.get_node(name)
            elif kind == "pods":
                obj = self.get_pod(namespace or "default", name)
            else:
                raise ValueError(f"remove_finalizer: kind must be 'nodes' or 'pods', not {kind!r}")
            if obj is None:
                return None
            fins = obj["metadata"].get("finalizers") or []
            if finalizer not in fins:
                return obj
            patch = {"metadata": {"finalizers": [f for f in fins if f != finalizer] or None, "resourceVersion": obj["metadata"]["resourceVersion"]}}
            try:
                if kind == "nodes":
                    return self.patch_node(name, patch)
                return self._call(f"PATCH pods {namespace}/{name}",
                                  self._request("PATCH", _POD, {"namespace": namespace or "default", "name": name}, body=patch,
                                                content_type=_MERGE))
            except Conflict:
                continue
            except KubeError as e:
                if e.status == 404:
                    return None
                raise
        raise KubeError(f"PATCH {kind}/{name} finalizers", 409, "Conflict", "object kept changing")

    def add_finalizer(self, name: str, finalizer: str) -> dict | None:
        """Add a finalizer to a node (idempotent)."""

        def change(node: dict) -> dict | None:
            fins = node["metadata"].get("finalizers") or []
            return None if finalizer in fins else {"metadata": {"finalizers": fins + [finalizer]}}

        return self._update_node(name, change, f"PATCH nodes/{name} finalizers")

    def _eviction(self, namespace: str, name: str, body: dict) -> Callable:
        return self._request("POST", _POD + "/eviction", {"namespace": namespace, "name": name}, body=body)

    def evict_pod(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> bool:
        """policy/v1 Eviction.  True when evicted (or already gone); False when a PodDisruptionBudget blocks it (429)."""
        body: dict = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        try:
            self._call(f"EVICT pods {namespace}/{name}", self._eviction(namespace, name, body), retry_429=False)
            return True
        except KubeError as e:
            if e.status == 429:
                return False
            if e.status == 404:
                return True
            raise

    def evict(self, namespace: str, name: str) -> tuple[bool, str]:
        """policy/v1 Eviction, telling the two 429s apart: (True, "") when evicted or already gone; (False, "pdb") when
        a PodDisruptionBudget refused it; (False, "throttled[ Retry-After N]") for any other 429 (API Priority and
        Fairness: the budgets were not even asked).  5xx are retried; another error raises ``KubeError``."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        try:
            self._call(f"EVICT pods {namespace}/{name}", self._eviction(namespace, name, body), retry_429=False)
            return True, ""
        except KubeError as e:
            if e.status == 404:
                return True, ""
            if e.status != 429:
                raise
            if refused_by_budget(e.body, e.message):
                return False, "pdb"
            return False, "throttled" + (f" Retry-After {e.retry_after}s" if e.retry_after else "")

    def delete_pod(self, namespace: str, name: str, grace_period_seconds: int | None = None) -> bool:
        """True when deleted (or marked for deletion); False when it did not exist."""
        query = [("gracePeriodSeconds", grace_period_seconds)] if grace_period_seconds is not None else []
        try:
            self._call(f"DELETE pods {namespace}/{name}", self._request("DELETE", _POD, {"namespace": namespace, "name": name}, query))
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def delete_node(self, name: str) -> bool:
        """True when deleted (or marked for deletion, if it has finalizers); False when it did not exist."""
        try:
            self._call(f"DELETE nodes/{name}", self._request("DELETE", _NODE, {"name": name}))
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def bind_pod(self, namespace: str, name: str, node_name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace}, "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        self._call(f"BIND pods {namespace}/{name} -> {node_name}",
                   self._request("POST", _POD + "/binding", {"namespace": namespace, "name": name}, body=body))

    def create_event(
        self,
        involved_object: dict,
        reason: str,
        message: str,
        type: str = "Normal",  # noqa: A002 - the Kubernetes field name
        source: str = "karpenter",
        now: str | None = None,
    ) -> dict:
        """A core/v1 Event about ``involved_object`` (a Kubernetes object dict or an ObjectReference)."""
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        meta = involved_object.get("metadata") or {}
        ref = {
            "apiVersion": involved_object.get("apiVersion", "v1"),
            "kind": involved_object.get("kind", ""),
            "name": meta.get("name", involved_object.get("name")),
            "namespace": meta.get("namespace", involved_object.get("namespace")),
            "uid": meta.get("uid", involved_object.get("uid")),
        }
        ref = {k: v for k, v in ref.items() if v}
        ns = ref.get("namespace") or "default"
        ts = now or format_time(time.time())
        body = {
            "metadata": {"generateName": f"{ref.get('name', 'object')}.", "namespace": ns},
            "involvedObject": ref,
            "reason": reason,
            "message": message[:1024],
            "type": type,
            "source": {"component": source},
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }
        return self._call(f"CREATE events -n {ns}", self._request("POST", _ns(_CORE, "events"), {"namespace": ns}, body=body))
