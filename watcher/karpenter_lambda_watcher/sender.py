"""The SQS sender: message bodies batched per queue into SendMessageBatch calls, retried with backoff, from a
bounded submit queue drained by one thread.  Failed and dropped messages go back to the watcher (``on_drop``)
so it forgets their dedupe key."""

from __future__ import annotations

import queue
import random
import threading
import time
from typing import Callable

from .messages import MAX_BATCH_ENTRIES, MAX_MESSAGE_BYTES, pod_key_in
from .stats import Stats, log


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
            self.stats.inc("messages_unsent")
            self._q.put_nowait((queue_url, body, key))
            return True
        except queue.Full:
            self.stats.inc("messages_unsent", -1)
        self.stats.inc("messages_dropped")
        self.stats.inc("submit_dropped")
        with self._drop_lock:
            self._dropped.append((queue_url, key))
            self._dropped_names.append(name or pod_key_in(body) or key)
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
            self.stats.inc("messages_unsent", -1)
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
            try:
                self._send(url, entries)
            finally:
                self.stats.inc("messages_unsent", -len(entries))

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


