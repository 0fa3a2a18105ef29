"""A small but real Kubernetes API server for tests and the simulator.

``KubeAPIServer().start()`` serves JSON over HTTP on 127.0.0.1 (a random free
port unless one is given) from a thread and returns its URL; the official
``kubernetes`` Python client talks to it with ``Configuration(host=url)`` and
no authentication.  ``.store`` gives the simulator direct, thread-safe access
to the same objects (no HTTP).

What it implements (JSON only, no protobuf, no auth, no admission chain):

* resources: core/v1 pods, nodes, namespaces, events, configmaps, services,
  persistentvolumeclaims, persistentvolumes; storage.k8s.io/v1 storageclasses,
  csinodes; apps/v1 daemonsets, deployments,
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
  ``minAvailable``/``maxUnavailable``; 429 without Retry-After when a budget blocks, as the real server),
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
* storage: a PersistentVolumeClaim created without ``spec.storageClassName`` gets the
  default StorageClass (the DefaultStorageClass admission); claims and volumes start
  ``Pending`` (the simulator's PV controller, ``sim/storage.py``, binds them); a
  StorageClass needs ``provisioner`` and a CSINode its drivers' ``name`` and ``nodeID``
  (422 otherwise); a CSINode owned by a Node (``ownerReferences``) is deleted with it.
* uid, a global resourceVersion counter, creationTimestamp from an injectable
  ``clock`` (so the simulator's virtual clock is used).
* discovery: ``/version``, ``/api``, ``/api/v1``, ``/apis``, ``/apis/{g}/{v}`` (shortNames, categories, and the
  subresources: ``pods/eviction``, ``pods/binding``, ``*/status``, ``*/scale``), ``/healthz``, ``/readyz``, ``/livez``.
* what kubectl needs (docs/kubeapi.md): ``dryRun=All`` on every write, server-side apply
  (``application/apply-patch+yaml``, :mod:`.apply`), OpenAPI v3 and v2 (:mod:`.openapi`, schemas from the official
  client's models), ``fieldValidation`` (:mod:`.fieldcheck`), ``meta.k8s.io`` Table output (:mod:`.tables`);
  :mod:`.serve` serves a finished simulation (``simulate --serve``).
* test hooks: :meth:`KubeAPIServer.add_fault` (answer the next N matching
  requests with e.g. 429 or 500), :meth:`KubeAPIServer.drop_watches`
  (cut every open watch stream mid-flight), ``request_log``.

The package, one job per module: :mod:`.resources` (the served types, ``StoreError``), :mod:`.selectors`
(``labelSelector``/``fieldSelector`` query strings), :mod:`.patches` (merge, strategic merge, JSON patch),
:mod:`.store` (objects, resourceVersions, watch history, subresources, dry run), :mod:`.handler` (HTTP, top-level
routes), :mod:`.routes` (object routes), :mod:`.streams` (list, watch), :mod:`.discovery`, :mod:`.apply`,
:mod:`.schemas` + :mod:`.openapi` + :mod:`.fieldcheck`, :mod:`.tables`, :mod:`.serve`, :mod:`.faults` (injected error
answers); this module holds :class:`KubeAPIServer`, which ties them together.

Simplifications (documented in docs/watcher.md): no graceful pod termination
(a pod without finalizers is deleted at once), no owner-reference garbage
collection except a namespace's contents and a Node's CSINode, a watch with a selector does not
turn "object left the selector" into ``DELETED``, strategic merge knows the
merge keys by field name only.
"""

from __future__ import annotations

import re
import socket
import threading
from collections import deque
from typing import Any, Callable

from kubernetes import client as k8s

from .faults import FaultHooks
from .handler import _Handler, _Server
# re-exported: the names callers import from ``sim.kubeapi``
from .patches import json_patch, merge_patch, strategic_merge_patch  # noqa: F401
from .resources import _BY_GV, DEFAULT_NAMESPACES, RESOURCES, SCALABLE, ResourceType, StoreError  # noqa: F401
from .selectors import (match_field_selector, match_label_selector, match_selector_object,  # noqa: F401
                        parse_field_selector, parse_label_selector, selector_string)
from .store import ObjectStore

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



class KubeAPIServer(FaultHooks):
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
        self._init_faults()
        self.served = _BY_GV   # the (group, version) -> resources this server serves (discovery and routing)
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
        cfg = k8s.Configuration(host=self.url)
        return k8s.ApiClient(cfg)

