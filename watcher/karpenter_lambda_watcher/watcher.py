"""The in-cluster watcher: pending pods (and node/pod lifecycle events) -> SQS.

Depends only on ``kubernetes`` and ``boto3`` (and the standard library) so its
image stays small.  Objects are read as raw JSON (``_preload_content=False``)
and never turned into the client's models: less CPU, less memory, and no
failure on fields the client's models do not know.

Entry point for tests and embedding: :func:`run` (blocks until ``stop_event``
is set, then flushes what is queued and returns its :class:`Stats`).
The message schemas are a contract, documented in ``docs/watcher.md``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import queue
import random
import threading
import time
import zlib
from collections import OrderedDict
from typing import Any, Callable

__all__ = [
    "run",
    "Stats",
    "is_provisionable",
    "slim_pod",
    "node_summary",
    "pod_message",
    "SqsBatchSender",
    "MAX_MESSAGE_BYTES",
    "MAX_BATCH_ENTRIES",
]

log = logging.getLogger("karpenter_lambda_watcher")

MAX_MESSAGE_BYTES = 256 * 1024  # SQS limit per message and per SendMessageBatch request
MAX_BATCH_ENTRIES = 10
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


# ----------------------------------------------------------------------------- stats


class Stats:
    """Counters the watcher keeps; :meth:`wait_for` lets tests block on them without sleeping."""

    FIELDS = (
        "pods_seen",
        "pods_forwarded",
        "pods_deduped",
        "events_forwarded",
        "messages_sent",
        "batches_sent",
        "entries_retried",
        "messages_dropped",
        "submit_dropped",  # of which: the bounded submit queue was full (resync re-sends those pods)
        "lists",
        "relists_410",
        "watch_restarts",
        "connect_errors",
        "api_errors",
        "pods_resynced",
        "resync_checks",
        "resync_evicted",
        "pods_pending",  # a gauge: pods in the resync map
    )

    def __init__(self) -> None:
        self._cond = threading.Condition()
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.last_error: str | None = None

    def inc(self, field: str, n: int = 1) -> None:
        with self._cond:
            setattr(self, field, getattr(self, field) + n)
            self._cond.notify_all()

    def set(self, field: str, value: int) -> None:
        with self._cond:
            setattr(self, field, value)
            self._cond.notify_all()

    def note_error(self, msg: str) -> None:
        with self._cond:
            self.last_error = msg
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[["Stats"], bool], timeout: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def as_dict(self) -> dict:
        with self._cond:
            return {f: getattr(self, f) for f in self.FIELDS}


# ----------------------------------------------------------------------------- pod/node shaping


def _owner_kinds(meta: dict) -> set:
    return {o.get("kind") for o in meta.get("ownerReferences") or [] if isinstance(o, dict)}


def is_provisionable(pod: dict) -> bool:
    """Karpenter's rule: PodScheduled=False/Unschedulable, no nodeName, not nominated,
    not terminating or terminal, not owned by a DaemonSet or a Node (static pod)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if status.get("phase") in ("Succeeded", "Failed") or status.get("nominatedNodeName"):
        return False
    if _owner_kinds(meta) & {"DaemonSet", "Node"}:
        return False
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable"
    return False


def _pick(src: dict, keys) -> dict:
    return {k: src[k] for k in keys if src.get(k) is not None}


def slim_pod(pod: dict, drop_annotations: bool = False) -> dict:
    """The part of a pod the provisioner needs (see docs/watcher.md for the field list)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    m = _pick(meta, ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences", "creationTimestamp"))
    if not drop_annotations and meta.get("annotations"):
        ann = {k: v for k, v in meta["annotations"].items() if k not in _DROP_ANNOTATIONS}
        if ann:
            m["annotations"] = ann
    s = _pick(
        spec,
        (
            "overhead",
            "nodeSelector",
            "affinity",
            "tolerations",
            "topologySpreadConstraints",
            "priority",
            "priorityClassName",
            "schedulerName",
            "hostNetwork",
            "preemptionPolicy",
            "runtimeClassName",
        ),
    )
    s["containers"] = [
        _pick(c, ("name", "resources", "ports")) for c in spec.get("containers") or [] if isinstance(c, dict)
    ]
    if spec.get("initContainers"):
        s["initContainers"] = [
            _pick(c, ("name", "resources", "ports", "restartPolicy")) for c in spec["initContainers"] if isinstance(c, dict)
        ]
    vols = []
    for v in spec.get("volumes") or []:
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict):
            vols.append({"name": v.get("name"), "persistentVolumeClaim": {"claimName": v["persistentVolumeClaim"].get("claimName")}})
        elif isinstance(v, dict) and v.get("ephemeral") is not None:
            vols.append({"name": v.get("name"), "ephemeral": {}})
    if vols:
        s["volumes"] = vols
    return {"metadata": m, "spec": s}


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)


def _slim_json(pod: dict, cluster: str) -> tuple[str, bool] | None:
    """The slim pod as compact JSON, and whether its annotations were dropped to fit one SQS
    message; None if it cannot fit even then.  Room is kept for the largest envelope (with the
    ``resync`` and ``truncated`` keys), so a later re-send of the same JSON always fits too."""
    envelope = len(_pod_body("", True, cluster, resync=True).encode())
    pj = _dumps(slim_pod(pod))
    if envelope + len(pj.encode()) <= MAX_MESSAGE_BYTES:
        return pj, False
    pj = _dumps(slim_pod(pod, drop_annotations=True))
    if envelope + len(pj.encode()) <= MAX_MESSAGE_BYTES:
        return pj, True
    return None


def _pod_body(pod_json: str, truncated: bool, cluster: str, resync: bool = False) -> str:
    parts = ['{"type":"pod","cluster":', json.dumps(cluster), ',"sentAt":"', _now_iso(), '"']
    if resync:
        parts.append(',"resync":true')
    parts += [',"pod":', pod_json]
    if truncated:
        parts.append(',"truncated":["metadata.annotations"]')
    parts.append("}")
    return "".join(parts)


def pod_message(pod: dict, cluster: str, resync: bool = False) -> str | None:
    """The JSON body for a pending pod, shrunk if needed to fit one SQS message; None if it cannot fit.
    ``resync=True`` marks a re-send of an unchanged pod (``"resync": true``)."""
    slim = _slim_json(pod, cluster)
    if slim is None:
        return None
    body = _pod_body(slim[0], slim[1], cluster, resync)
    return body if len(body.encode()) <= MAX_MESSAGE_BYTES else None


def _pod_ref(pod: dict) -> dict:
    meta = pod.get("metadata") or {}
    kinds = [o.get("kind") for o in meta.get("ownerReferences") or [] if isinstance(o, dict) and o.get("controller")]
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
        "nodeName": (pod.get("spec") or {}).get("nodeName") or None,
        "ownerKind": kinds[0] if kinds else None,
    }


def node_summary(node: dict) -> dict:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    ready = "Unknown"
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = c.get("status") or "Unknown"
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "providerID": spec.get("providerID"),
        "labels": meta.get("labels") or {},
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
        "ready": ready,
        "allocatable": status.get("allocatable") or {},
    }


def _node_digest(summary: dict) -> str:
    d = {k: v for k, v in summary.items() if k not in ("resourceVersion",)}
    return _dumps(d)


# ----------------------------------------------------------------------------- SQS sender


def _name_in(body: str) -> str:
    """``namespace/name`` of the pod in a message body (for the drop log), or ""."""
    try:
        meta = (json.loads(body).get("pod") or {}).get("metadata") or {}
    except (ValueError, AttributeError):
        return ""
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("name") else ""


class SqsBatchSender:
    """Batches message bodies per queue into SendMessageBatch calls.

    A batch goes out when it holds 10 entries, when the next body would push it
    over 256 KiB, or ``flush_interval`` seconds after its first entry.  Entries
    that fail server-side are retried with backoff (``max_attempts``); entries
    that still fail are reported to ``on_drop`` (the watcher forgets their
    dedupe key so a later relist sends them again).

    The submit queue is bounded (``max_queue`` messages): when SQS is slower than
    the watch for long, :meth:`submit` drops the message instead of growing without
    limit, counts it (``messages_dropped``, ``submit_dropped``) and logs the pods it
    dropped (one warning per ``drop_log_interval`` seconds, naming up to 50); the
    drops go to ``on_drop`` from the sender thread.  A dropped pod is still in the
    watcher's resync map, so the next resync re-sends it while it is pending.
    """

    def __init__(
        self,
        sqs_client,
        stats: Stats,
        flush_interval: float = 1.0,
        max_attempts: int = 5,
        backoff_base: float = 0.2,
        backoff_cap: float = 5.0,
        on_drop: Callable[[str, str], None] | None = None,
        max_queue: int = 10000,
        drop_log_interval: float = 5.0,
    ) -> None:
        if not isinstance(max_queue, int) or isinstance(max_queue, bool) or max_queue < 1:
            raise ValueError(f"max_queue (SUBMIT_QUEUE_MAX) must be an integer >= 1, got {max_queue!r}")
        self.sqs = sqs_client
        self.stats = stats
        self.flush_interval = flush_interval
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.on_drop = on_drop
        self.max_queue = max_queue
        self.drop_log_interval = drop_log_interval
        self._q: queue.Queue = queue.Queue(maxsize=max_queue)
        self._drop_lock = threading.Lock()
        self._dropped: list[tuple[str, str]] = []   # (url, key) for on_drop, handed over by the sender thread
        self._dropped_names: list[str] = []         # not yet logged
        self._dropped_unlogged = 0
        self._last_drop_log = float("-inf")
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sqs-sender", daemon=True)
        self._pending: dict[str, list[tuple[str, str]]] = {}
        self._pending_bytes: dict[str, int] = {}
        self._first_at: dict[str, float] = {}
        self._seq = 0

    def start(self) -> "SqsBatchSender":
        self._thread.start()
        return self

    def submit(self, queue_url: str, body: str, key: str = "", name: str = "") -> bool:
        """Queue a message for sending; False (and counted, logged) when the bounded queue is full.
        ``name`` (e.g. ``namespace/pod``) is what the drop log calls it; read from the body when not given."""
        try:
            self._q.put_nowait((queue_url, body, key))
            return True
        except queue.Full:
            pass
        self.stats.inc("messages_dropped")
        self.stats.inc("submit_dropped")
        with self._drop_lock:
            self._dropped.append((queue_url, key))
            self._dropped_names.append(name or _name_in(body) or key)
            self._dropped_unlogged += 1
        self._log_drops()
        return False

    def _log_drops(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._drop_lock:
            if not self._dropped_unlogged or (not force and now - self._last_drop_log < self.drop_log_interval):
                return
            names, count = self._dropped_names[:50], self._dropped_unlogged
            self._dropped_names, self._dropped_unlogged, self._last_drop_log = [], 0, now
        log.warning(f"submit queue full ({self.max_queue} messages): dropped {count} message(s); pods still "
                    f"pending are re-sent by the resync", extra={"json": {"dropped": count, "pods": names,
                                                                          "queueMax": self.max_queue}})

    def _hand_over_drops(self) -> None:
        with self._drop_lock:
            dropped, self._dropped = self._dropped, []
        if self.on_drop:
            for url, key in dropped:
                self.on_drop(url, key)
        self._log_drops()

    def backlog(self) -> int:
        """Messages submitted but not yet taken by the sender thread (approximate)."""
        return self._q.qsize()

    def close(self, timeout: float = 30.0) -> None:
        """Flush everything queued, then stop."""
        self._closing.set()
        self._q.put(None)
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            timeout = 0.5
            if self._first_at:
                timeout = max(0.0, min(self._first_at.values()) + self.flush_interval - time.monotonic())
            try:
                item = self._q.get(timeout=timeout)
            except queue.Empty:
                item = False
            if item is None:  # close(): everything submitted before it is already queued
                while True:
                    try:
                        rest = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if rest:
                        self._add(*rest)
                for url in list(self._pending):
                    self._flush(url)
                self._hand_over_drops()
                self._log_drops(force=True)
                return
            if item:
                self._add(*item)
            if self._dropped or self._dropped_unlogged:
                self._hand_over_drops()
            now = time.monotonic()
            for url in [u for u, t in self._first_at.items() if now - t >= self.flush_interval]:
                self._flush(url)

    def _add(self, url: str, body: str, key: str) -> None:
        size = len(body.encode())
        if size > MAX_MESSAGE_BYTES:
            log.error("message too large for SQS, dropped", extra={"json": {"bytes": size, "key": key}})
            self.stats.inc("messages_dropped")
            if self.on_drop:
                self.on_drop(url, key)
            return
        if url in self._pending and (self._pending_bytes[url] + size > MAX_MESSAGE_BYTES):
            self._flush(url)
        self._pending.setdefault(url, []).append((body, key))
        self._pending_bytes[url] = self._pending_bytes.get(url, 0) + size
        self._first_at.setdefault(url, time.monotonic())
        if len(self._pending[url]) >= MAX_BATCH_ENTRIES:
            self._flush(url)

    def _flush(self, url: str) -> None:
        entries = self._pending.pop(url, [])
        self._pending_bytes.pop(url, None)
        self._first_at.pop(url, None)
        if entries:
            self._send(url, entries)

    def _send(self, url: str, entries: list[tuple[str, str]]) -> None:
        fifo = url.endswith(".fifo")
        todo = {}
        for body, key in entries:
            self._seq += 1
            todo[f"m{self._seq}"] = (body, key)
        attempt = 0
        while todo:
            attempt += 1
            batch = []
            for eid, (body, key) in todo.items():
                e = {"Id": eid, "MessageBody": body}
                if fifo:
                    e["MessageGroupId"] = "pods"
                    e["MessageDeduplicationId"] = (key or eid).replace("/", "-")[:128]
                batch.append(e)
            failed: dict[str, tuple[str, str]] = {}
            try:
                resp = self.sqs.send_message_batch(QueueUrl=url, Entries=batch)
                self.stats.inc("batches_sent")
                ok = len(resp.get("Successful") or [])
                self.stats.inc("messages_sent", ok)
                for f in resp.get("Failed") or []:
                    eid = f.get("Id")
                    if eid not in todo:
                        continue
                    if f.get("SenderFault"):
                        log.error("SQS rejected message", extra={"json": {"code": f.get("Code"), "message": f.get("Message")}})
                        self.stats.inc("messages_dropped")
                        if self.on_drop:
                            self.on_drop(url, todo[eid][1])
                    else:
                        failed[eid] = todo[eid]
            except Exception as e:  # network error, throttling, ...: retry the whole batch
                log.warning("SendMessageBatch failed", extra={"json": {"error": f"{type(e).__name__}: {e}", "attempt": attempt}})
                self.stats.note_error(f"sqs: {e}")
                failed = dict(todo)
            if failed and attempt >= self.max_attempts:
                log.error("giving up on messages after retries", extra={"json": {"count": len(failed)}})
                self.stats.inc("messages_dropped", len(failed))
                if self.on_drop:
                    for _b, key in failed.values():
                        self.on_drop(url, key)
                return
            if failed:
                self.stats.inc("entries_retried", len(failed))
                time.sleep(random.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))))
            todo = failed


# ----------------------------------------------------------------------------- list + watch


class _Gone(Exception):
    pass


class _Reflector:
    """List, then watch from the list's resourceVersion; resume after drops, relist on 410."""

    def __init__(self, name: str, list_fn, handler, stop_event: threading.Event, stats: Stats, watch_timeout: int, backoff_base: float, backoff_cap: float, page_size: int):
        self.name = name
        self.list_fn = list_fn
        self.handler = handler
        self.stop_event = stop_event
        self.stats = stats
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.page_size = page_size
        self._resp = None
        self._failures = 0
        self.thread = threading.Thread(target=self._run, name=f"reflector-{name}", daemon=True)

    def interrupt(self) -> None:
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()
            except Exception:
                pass

    def _backoff(self) -> None:
        self._failures += 1
        delay = random.uniform(self.backoff_base / 2, min(self.backoff_cap, self.backoff_base * 2 ** (self._failures - 1)))
        self.stop_event.wait(delay)

    def _list(self) -> str:
        """Page through the collection (``page_size`` objects in memory at a time) and sync the handler."""
        token = None
        rv = ""
        self.handler.on_list_begin()
        while True:
            kw: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, 60)}
            if token:
                kw["_continue"] = token
            resp = self.list_fn(**kw)
            try:
                doc = json.loads(resp.data)
            finally:
                resp.release_conn()
            for item in doc.get("items") or []:
                self.handler.on_list_item(item)
            meta = doc.get("metadata") or {}
            rv = rv or meta.get("resourceVersion") or ""
            token = meta.get("continue")
            del doc
            if not token:
                break
        self.handler.on_list_end()
        self.stats.inc("lists")
        return rv

    def _watch(self, rv: str) -> str:
        resp = self.list_fn(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(10, self.watch_timeout + 60),
        )
        self._resp = resp
        try:
            buf = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                if self.stop_event.is_set():
                    return rv
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    etype, obj = ev.get("type"), ev.get("object") or {}
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            raise _Gone(obj.get("message") or "410 Gone")
                        raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
                    new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if etype != "BOOKMARK":
                        self.handler.on_event(etype, obj)
                    if new_rv:
                        rv = new_rv
                    self._failures = 0
            return rv
        finally:
            self._resp = None
            try:
                resp.release_conn()
            except Exception:
                pass

    def _run(self) -> None:
        from kubernetes.client.exceptions import ApiException

        rv = None
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    self._failures = 0
                rv = self._watch(rv)
                if not self.stop_event.is_set():
                    self.stats.inc("watch_restarts")
            except _Gone as e:
                log.info("watch expired, relisting", extra={"json": {"resource": self.name, "reason": str(e)}})
                self.stats.inc("relists_410")
                rv = None
            except ApiException as e:
                if e.status == 410:
                    self.stats.inc("relists_410")
                    rv = None
                    continue
                self.stats.inc("api_errors")
                self.stats.note_error(f"{self.name}: HTTP {e.status} {e.reason}")
                log.warning("API error", extra={"json": {"resource": self.name, "status": e.status, "reason": str(e.reason)}})
                self._backoff()
            except Exception as e:  # connection refused/reset, protocol errors, bad JSON: resume from rv
                if self.stop_event.is_set():
                    break
                self.stats.inc("connect_errors")
                self.stats.note_error(f"{self.name}: {type(e).__name__}: {e}")
                log.warning("watch connection failed", extra={"json": {"resource": self.name, "error": f"{type(e).__name__}: {e}", "resourceVersion": rv}})
                self._backoff()


# ----------------------------------------------------------------------------- handlers


class _PodHandler:
    """Forwards pending pods, tracks bindings/deletions, and keeps the resync map.

    The resync map (``uid -> (slim pod JSON zlib-compressed, truncated, dedupe key, last sent)``) holds the pods
    that are provisionable right now, in order of their last send (oldest first).  It follows the
    list and watch (entries are replaced when a pod is forwarded again, removed when it is bound,
    deleted or no longer provisionable) and is rebuilt by every list.  :meth:`resync_due`
    re-sends the entries last sent at least ``resync_seconds`` ago, like an informer's resync.
    """

    def __init__(
        self,
        cluster: str,
        sender: SqsBatchSender,
        queue_url: str,
        event_queue_url: str | None,
        stats: Stats,
        dedupe_size: int,
        resync_seconds: float = 0.0,
        resync_max_pods: int = 50000,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.cluster = cluster
        self.sender = sender
        self.queue_url = queue_url
        self.event_queue_url = event_queue_url
        self.stats = stats
        self.dedupe_size = dedupe_size
        self.resync_seconds = resync_seconds
        self.resync_max_pods = resync_max_pods
        self.clock = clock
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, str, str]] = {}  # uid -> (namespace, name, nodeName)
        self._old: dict[str, tuple[str, str, str]] | None = None  # set while a list is running
        self._listed_once = False
        self._pending: OrderedDict[str, tuple[bytes, bool, str, float]] = OrderedDict()
        self._old_pending: OrderedDict[str, tuple[bytes, bool, str, float]] | None = None
        self._resync_seq = 0

    def forget(self, _url: str, key: str) -> None:
        with self._lock:
            self._seen.pop(key, None)

    # -- the resync map ------------------------------------------------------------------
    def _set_pending(self, uid: str, pod_json: str, truncated: bool, key: str) -> None:
        """Insert or replace (as the newest) an entry, dropping the oldest beyond the bound.
        The JSON is kept zlib-compressed (level 1): about a third smaller, ~20 us per pod."""
        entry = (zlib.compress(pod_json.encode(), 1), truncated, key, self.clock())
        with self._lock:
            self._pending.pop(uid, None)
            self._pending[uid] = entry
            while len(self._pending) > self.resync_max_pods:
                old_uid, (_pj, _t, old_key, _at) = self._pending.popitem(last=False)
                self.stats.inc("resync_evicted")
                if self.stats.resync_evicted == 1 or self.stats.resync_evicted % 1000 == 0:
                    log.warning(
                        "resync map full: oldest pending pod dropped (it is re-sent only when it changes)",
                        extra={"json": {"uid": old_uid, "key": old_key, "max": self.resync_max_pods, "evicted": self.stats.resync_evicted}},
                    )
            n = len(self._pending)
        self.stats.set("pods_pending", n)

    def _drop_pending(self, uid: str) -> None:
        if not self.resync_seconds:
            return
        with self._lock:
            self._pending.pop(uid, None)
            if self._old_pending is not None:
                self._old_pending.pop(uid, None)
            n = len(self._pending)
        self.stats.set("pods_pending", n)

    def resync_due(self, max_backlog: int = 1000) -> int:
        """Re-send (``"resync": true``) the pending pods last sent at least ``resync_seconds`` ago,
        oldest first, keeping the sender's backlog under ``max_backlog``.  Returns how many."""
        if not self.resync_seconds:
            return 0
        # never more than the sender's bounded queue can take (the surplus would only be dropped)
        budget = min(max_backlog, getattr(self.sender, "max_queue", max_backlog)) - self.sender.backlog()
        if budget <= 0:
            return 0
        now = self.clock()
        cutoff = now - self.resync_seconds
        sent = 0
        with self._lock:
            if self._old_pending is not None:  # a list is rebuilding the map
                return 0
            while self._pending and sent < budget:
                uid, (packed, truncated, key, last) = next(iter(self._pending.items()))
                if last > cutoff:
                    break
                self._resync_seq += 1
                body = _pod_body(zlib.decompress(packed).decode(), truncated, self.cluster, resync=True)
                self.sender.submit(self.queue_url, body, f"{key}/resync-{self._resync_seq}")
                self._pending.move_to_end(uid)
                self._pending[uid] = (packed, truncated, key, now)
                sent += 1
        if sent:
            self.stats.inc("pods_resynced", sent)
            log.debug("resynced pending pods", extra={"json": {"count": sent}})
        return sent

    # -- forwarding ----------------------------------------------------------------------
    def _maybe_forward(self, pod: dict) -> None:
        self.stats.inc("pods_seen")
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or ""
        if not is_provisionable(pod):
            self._drop_pending(uid)
            return
        key = f"{uid}/{meta.get('resourceVersion')}"
        with self._lock:
            deduped = key in self._seen
            if deduped:
                self._seen.move_to_end(key)
                tracked = uid in self._pending
            else:
                self._seen[key] = None
                while len(self._seen) > self.dedupe_size:
                    self._seen.popitem(last=False)
        if deduped:
            self.stats.inc("pods_deduped")
            if self.resync_seconds and not tracked:  # sent before, but not in the map (evicted): track it again
                slim = _slim_json(pod, self.cluster)
                if slim is not None:
                    self._set_pending(uid, slim[0], slim[1], key)
            return
        slim = _slim_json(pod, self.cluster)
        if slim is None:
            log.error("pod too large to forward even without annotations", extra={"json": {"pod": f"{meta.get('namespace')}/{meta.get('name')}"}})
            self.stats.inc("messages_dropped")
            self._drop_pending(uid)
            return
        self.sender.submit(self.queue_url, _pod_body(slim[0], slim[1], self.cluster), key)
        self.stats.inc("pods_forwarded")
        if self.resync_seconds:
            self._set_pending(uid, slim[0], slim[1], key)

    def _event(self, etype: str, pod: dict) -> None:
        if not self.event_queue_url:
            return
        body = _dumps({"type": etype, "cluster": self.cluster, "sentAt": _now_iso(), "pod": _pod_ref(pod)})
        self.sender.submit(self.event_queue_url, body, f"{etype}/{(pod.get('metadata') or {}).get('uid')}")
        self.stats.inc("events_forwarded")

    def _track(self, pod: dict, emit_bound: bool) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or ""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        prev = self._known.get(uid)
        if node and emit_bound and (prev is None or not prev[2]):
            self._event("pod-bound", pod)
        self._known[uid] = (meta.get("namespace") or "", meta.get("name") or "", node)

    # -- reflector callbacks -------------------------------------------------------------
    def on_list_begin(self) -> None:
        if self._old is None:
            self._old = self._known
        else:  # the previous list failed part way: what it rebuilt is the newest state
            self._old.update(self._known)
        self._known = {}
        if self.resync_seconds:
            with self._lock:
                if self._old_pending is None:
                    self._old_pending = self._pending
                else:
                    self._old_pending.update(self._pending)
                self._pending = OrderedDict()

    def on_list_item(self, p: dict) -> None:
        uid = (p.get("metadata") or {}).get("uid") or ""
        if uid in self._old:
            self._known[uid] = self._old[uid]
        if self.resync_seconds:
            with self._lock:
                entry = self._old_pending.pop(uid, None) if self._old_pending is not None else None
                if entry is not None:  # keeps its last send time; _maybe_forward replaces or drops it
                    self._pending[uid] = entry
        self._track(p, emit_bound=self._listed_once)
        self._maybe_forward(p)

    def on_list_end(self) -> None:
        old = self._old or {}
        if self._listed_once:
            for uid, (ns, name, node) in old.items():
                if uid not in self._known:
                    self._event("pod-deleted", {"metadata": {"uid": uid, "namespace": ns, "name": name}, "spec": {"nodeName": node}})
        self._old = None
        self._listed_once = True
        if self.resync_seconds:
            with self._lock:
                # pods gone from the list are dropped with the old map; keep oldest-sent first
                self._pending = OrderedDict(sorted(self._pending.items(), key=lambda kv: kv[1][3]))
                self._old_pending = None
                n = len(self._pending)
            self.stats.set("pods_pending", n)

    def on_event(self, etype: str, pod: dict) -> None:
        if etype == "DELETED":
            uid = (pod.get("metadata") or {}).get("uid") or ""
            self._known.pop(uid, None)
            self._drop_pending(uid)
            self._event("pod-deleted", pod)
            return
        self._track(pod, emit_bound=True)
        self._maybe_forward(pod)


class _NodeHandler:
    def __init__(self, cluster: str, sender: SqsBatchSender, event_queue_url: str, stats: Stats):
        self.cluster = cluster
        self.sender = sender
        self.url = event_queue_url
        self.stats = stats
        self._digest: dict[str, str] = {}

    def _emit(self, event: str, summary: dict) -> None:
        body = _dumps({"type": "node", "event": event, "cluster": self.cluster, "sentAt": _now_iso(), "node": summary})
        self.sender.submit(self.url, body, f"node/{summary.get('uid')}/{summary.get('resourceVersion')}")
        self.stats.inc("events_forwarded")

    def _upsert(self, node: dict) -> None:
        s = node_summary(node)
        d = _node_digest(s)
        prev = self._digest.get(s["name"])
        if prev == d:
            return
        self._digest[s["name"]] = d
        self._emit("ADDED" if prev is None else "MODIFIED", s)

    def on_list_begin(self) -> None:
        self._names: set = set()

    def on_list_item(self, n: dict) -> None:
        self._names.add((n.get("metadata") or {}).get("name"))
        self._upsert(n)

    def on_list_end(self) -> None:
        for name in [n for n in self._digest if n not in self._names]:
            prev = json.loads(self._digest.pop(name))
            self._emit("DELETED", prev)
        self._names = set()

    def on_event(self, etype: str, node: dict) -> None:
        if etype == "DELETED":
            self._digest.pop((node.get("metadata") or {}).get("name"), None)
            self._emit("DELETED", node_summary(node))
        else:
            self._upsert(node)


# ----------------------------------------------------------------------------- API access

_QUERY_NAMES = {
    "watch": "watch",
    "resource_version": "resourceVersion",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "limit": "limit",
    "_continue": "continue",
}


def _lister(api_client, path: str):
    """``GET path`` through the official client's ApiClient (auth, TLS, token refresh included),
    returning the raw urllib3 response.  Going through ``ApiClient`` rather than ``CoreV1Api``
    keeps the 47k-line generated API module (about 20 MB) out of memory."""
    from kubernetes.client.exceptions import ApiException

    def call(_request_timeout=None, _preload_content=False, **kw):
        query = []
        for k, v in kw.items():
            if v is None:
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            query.append((_QUERY_NAMES[k], v))
        params = api_client.param_serialize(
            method="GET",
            resource_path=path,
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(*params, _request_timeout=_request_timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    return call


# ----------------------------------------------------------------------------- run


def _resync_loop(pods: _PodHandler, stop_event: threading.Event, poll: float) -> None:
    while not stop_event.wait(poll):
        try:
            pods.resync_due()
        except Exception as e:  # never let the resync thread die
            log.exception("resync failed", extra={"json": {"error": f"{type(e).__name__}: {e}"}})
        pods.stats.inc("resync_checks")


def run(
    api_client,
    sqs_client,
    queue_url: str,
    cluster: str,
    stop_event: threading.Event,
    event_queue_url: str | None = None,
    *,
    watch_timeout: int = 300,
    backoff_base: float = 0.5,
    backoff_cap: float = 30.0,
    flush_interval: float = 1.0,
    dedupe_size: int = 10000,
    page_size: int = 500,
    send_attempts: int = 5,
    resync_seconds: float = 60.0,
    resync_max_pods: int = 50000,
    resync_poll: float = 1.0,
    submit_queue_max: int = 10000,
    clock: Callable[[], float] = time.monotonic,
    stats: Stats | None = None,
) -> Stats:
    """Watch pods (and nodes when ``event_queue_url`` is set) and forward to SQS until ``stop_event`` is set.

    ``api_client``: a ``kubernetes.client.ApiClient``.  ``sqs_client``: a boto3 SQS client.
    ``resync_seconds``: re-send pods still pending this long after their last send (0 = never);
    the map of pending pods holds at most ``resync_max_pods``; ``clock`` (seconds, monotonic)
    decides when a re-send is due and is checked every ``resync_poll`` real seconds.
    ``submit_queue_max``: messages waiting for the SQS sender at most; beyond, new ones are dropped,
    counted and logged by pod name (the resync re-sends pods still pending).
    Returns the :class:`Stats` (pass your own to watch progress from another thread).
    """
    if not queue_url:
        raise ValueError("queue_url (POD_QUEUE_URL) is required")
    if not cluster:
        raise ValueError("cluster (CLUSTER_NAME) is required")
    if not isinstance(resync_seconds, (int, float)) or isinstance(resync_seconds, bool) or resync_seconds < 0:
        raise ValueError(f"resync_seconds (RESYNC_SECONDS) must be a number >= 0 (0 disables), got {resync_seconds!r}")
    if not isinstance(resync_max_pods, int) or isinstance(resync_max_pods, bool) or resync_max_pods < 1:
        raise ValueError(f"resync_max_pods (RESYNC_MAX_PODS) must be an integer >= 1, got {resync_max_pods!r}")
    if not isinstance(resync_poll, (int, float)) or resync_poll <= 0:
        raise ValueError(f"resync_poll must be a number > 0, got {resync_poll!r}")
    stats = stats or Stats()
    sender = SqsBatchSender(sqs_client, stats, flush_interval=flush_interval, max_attempts=send_attempts,
                            max_queue=submit_queue_max)
    pods = _PodHandler(cluster, sender, queue_url, event_queue_url, stats, dedupe_size, resync_seconds=resync_seconds, resync_max_pods=resync_max_pods, clock=clock)
    sender.on_drop = pods.forget
    sender.start()
    reflectors = [
        _Reflector("pods", _lister(api_client, "/api/v1/pods"), pods, stop_event, stats, watch_timeout, backoff_base, backoff_cap, page_size)
    ]
    if event_queue_url:
        nodes = _NodeHandler(cluster, sender, event_queue_url, stats)
        reflectors.append(_Reflector("nodes", _lister(api_client, "/api/v1/nodes"), nodes, stop_event, stats, watch_timeout, backoff_base, backoff_cap, page_size))
    resyncer = None
    if resync_seconds:
        resyncer = threading.Thread(target=_resync_loop, args=(pods, stop_event, min(resync_poll, resync_seconds)), name="resync", daemon=True)
    log.info("watcher started", extra={"json": {"cluster": cluster, "queue": queue_url, "eventQueue": event_queue_url, "resyncSeconds": resync_seconds}})
    for r in reflectors:
        r.thread.start()
    if resyncer is not None:
        resyncer.start()
    stop_event.wait()
    for r in reflectors:
        r.interrupt()
    for r in reflectors:
        r.thread.join(timeout=10)
    if resyncer is not None:
        resyncer.join(timeout=10)
    sender.close()
    log.info("watcher stopped", extra={"json": stats.as_dict()})
    return stats
