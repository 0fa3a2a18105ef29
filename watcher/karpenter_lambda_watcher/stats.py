"""The watcher's counters (:class:`Stats`) and its one logger (``karpenter_lambda_watcher``)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("karpenter_lambda_watcher")


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
        "messages_unsent",  # a gauge: messages submitted to the sender and not yet sent, dropped or given up on
    )

    def __init__(self) -> None:
        self._cond = threading.Condition()
        for f in self.FIELDS:
            setattr(self, f, 0)
        self.last_error: str | None = None
        # per watched resource ("pods", "nodes"): the resourceVersion up to which every event has been handed to the
        # handler (a list's, then each event's or bookmark's). Opaque strings, as Kubernetes says.
        self.synced: dict[str, str] = {}

    def inc(self, field: str, n: int = 1) -> None:
        with self._cond:
            setattr(self, field, getattr(self, field) + n)
            self._cond.notify_all()

    def set(self, field: str, value: int) -> None:
        with self._cond:
            setattr(self, field, value)
            self._cond.notify_all()

    def note_synced(self, resource: str, resource_version: str) -> None:
        with self._cond:
            self.synced[resource] = resource_version
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
