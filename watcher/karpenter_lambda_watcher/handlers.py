"""What the watcher does with each pod and node it lists or watches (the reflectors' handlers).

:func:`is_provisionable` is the pending-unschedulable filter.  :class:`PodHandler` forwards provisionable pods
(deduplicated by uid/resourceVersion), emits ``pod-bound`` / ``pod-deleted`` events, and keeps the resync map
of pods still pending.  :class:`NodeHandler` emits a ``node`` event when a node's summary changes."""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import OrderedDict
from typing import Callable

from .messages import node_digest, node_event, node_summary, pod_body, pod_event, pod_key, slim_json
from .sender import SqsBatchSender
from .stats import Stats, log


# The owners that make a pod not provisionable, as Karpenter's IsOwnedByDaemonSet / IsOwnedByNode match them: the kind
# AND the apiVersion (a DaemonSet of another API group, e.g. apps.kruise.io/v1alpha1, is not one of them).
NOT_PROVISIONABLE_OWNERS = frozenset({("apps/v1", "DaemonSet"), ("v1", "Node")})


def is_owned_by_daemonset_or_node(pod: dict) -> bool:
    """Owned by an apps/v1 DaemonSet or a v1 Node (a static/mirror pod), as Karpenter's ``IsOwnedBy``.

    An ownerReference without ``apiVersion`` cannot exist on a real API server (the field is required); one is read
    as the kind's core group here, so hand-made objects that leave it out keep their meaning."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, dict):
            continue
        kind, api_version = ref.get("kind"), ref.get("apiVersion")
        if api_version is None:
            api_version = {"DaemonSet": "apps/v1", "Node": "v1"}.get(kind)
        if (api_version, kind) in NOT_PROVISIONABLE_OWNERS:
            return True
    return False


def is_provisionable(pod: dict) -> bool:
    """Karpenter's rule (``IsProvisionable``): PodScheduled=False/Unschedulable, no nodeName, not nominated
    (preempting), not owned by an apps/v1 DaemonSet or a v1 Node (static pod) -- plus, unlike Karpenter, not
    terminating nor terminal (the kube-scheduler never binds a pod that is being deleted: capacity for it would
    only sit empty; its controller's replacement pod is forwarded on its own)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if status.get("phase") in ("Succeeded", "Failed") or status.get("nominatedNodeName"):
        return False
    if is_owned_by_daemonset_or_node(pod):
        return False
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable"
    return False


class PodHandler:
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
                body = pod_body(zlib.decompress(packed).decode(), truncated, self.cluster, resync=True)
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
                slim = slim_json(pod, self.cluster)
                if slim is not None:
                    self._set_pending(uid, slim[0], slim[1], key)
            return
        slim = slim_json(pod, self.cluster)
        if slim is None:
            log.error("pod too large to forward even without annotations", extra={"json": {"pod": pod_key(pod)}})
            self.stats.inc("messages_dropped")
            self._drop_pending(uid)
            return
        self.sender.submit(self.queue_url, pod_body(slim[0], slim[1], self.cluster), key)
        self.stats.inc("pods_forwarded")
        if self.resync_seconds:
            self._set_pending(uid, slim[0], slim[1], key)

    def _event(self, etype: str, pod: dict) -> None:
        if not self.event_queue_url:
            return
        body = pod_event(etype, self.cluster, pod)
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


class NodeHandler:
    def __init__(self, cluster: str, sender: SqsBatchSender, event_queue_url: str, stats: Stats):
        self.cluster = cluster
        self.sender = sender
        self.url = event_queue_url
        self.stats = stats
        self._digest: dict[str, str] = {}

    def _emit(self, event: str, summary: dict) -> None:
        body = node_event(event, self.cluster, summary)
        self.sender.submit(self.url, body, f"node/{summary.get('uid')}/{summary.get('resourceVersion')}")
        self.stats.inc("events_forwarded")

    def _upsert(self, node: dict) -> None:
        s = node_summary(node)
        d = node_digest(s)
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

