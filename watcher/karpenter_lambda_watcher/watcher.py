"""The in-cluster watcher: pending pods (and node/pod lifecycle events) -> SQS.

Depends only on ``boto3`` (with its ``urllib3``) and the standard library in a pod, the official
``kubernetes`` client for a kubeconfig off a cluster, so it stays small.  Objects are read as raw JSON (``_preload_content=False``)
and never turned into the client's models: less CPU, less memory, and no
failure on fields the client's models do not know.

Entry point for tests and embedding: :func:`run` (blocks until ``stop_event``
is set, then flushes what is queued and returns its :class:`Stats`).
The message schemas are a contract, documented in ``docs/watcher.md``.

The package by job (this module wires them together and re-exports their names):
  - ``messages``: the SQS message bodies, their size limits, the time format and the pod key;
  - ``sender``: :class:`SqsBatchSender`, batching, retries and the bounded submit queue;
  - ``reflector``: list + watch with resourceVersion, bookmarks and relist on 410;
  - ``kubeclient``: :class:`KubeHTTP`, the API access (service-account token and CA, or a plain URL);
  - ``handlers``: what a pod or node event does (the pending-unschedulable filter, dedupe, resync map);
  - ``stats``: the counters and the logger.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from .handlers import NodeHandler, PodHandler, is_provisionable
from .messages import MAX_BATCH_ENTRIES, MAX_MESSAGE_BYTES, node_summary, pod_message, slim_pod
from .reflector import Reflector, lister
from .sender import SqsBatchSender
from .stats import Stats, log

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

_PodHandler = PodHandler  # its name before the split (tests/watcher import it from here)


def _resync_loop(pods: PodHandler, stop_event: threading.Event, poll: float) -> None:
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

    ``api_client``: a :class:`kubeclient.KubeHTTP` or an official ``kubernetes.client.ApiClient``.  ``sqs_client``: a boto3 SQS client.
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
    pods = PodHandler(cluster, sender, queue_url, event_queue_url, stats, dedupe_size, resync_seconds=resync_seconds, resync_max_pods=resync_max_pods, clock=clock)
    sender.on_drop = pods.forget
    sender.start()
    reflectors = [
        Reflector("pods", lister(api_client, "/api/v1/pods"), pods, stop_event, stats, watch_timeout, backoff_base, backoff_cap, page_size)
    ]
    if event_queue_url:
        nodes = NodeHandler(cluster, sender, event_queue_url, stats)
        reflectors.append(Reflector("nodes", lister(api_client, "/api/v1/nodes"), nodes, stop_event, stats, watch_timeout, backoff_base, backoff_cap, page_size))
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
