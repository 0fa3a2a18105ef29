"""The feeds into the functions: the watcher thread and the SQS pod queue to the provisioner (Karpenter's batching
window), EventBridge schedules to the sweeps, and every handler call with its logs captured."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
import threading
import time
from pathlib import Path

import boto3

from ..api import events as kev
from ..api.kube import pod_key
from .environment import LambdaContext, SimulationError, capture_logs, load_module
from .functions import load_functions
from .heap import settle_heap

MAX_RECEIVES = 5


class FeedsMixin:
    """The :class:`~.simulator.Simulation`'s inputs to the functions."""

    def _load_functions(self, root: Path) -> None:
        """Every function of the registry, on its trigger: the pod queue feeds the provisioner, schedules run sweeps."""
        self.scheduled: list[tuple[str, object, float]] = []   # (name, module, interval seconds)
        self.provisioner = None
        self.offpeak = None
        self.interruption = None
        for fn in load_functions(root):
            mod = load_module(fn.handler_path, f"sim_{fn.name}_handler")
            capture_logs(mod, self.handler_logs if self.handler_logs is not None else io.StringIO())
            if fn.queue == "pod":
                self.provisioner = mod
            elif fn.queue == "interruption":
                self.interruption = mod   # fed by Scenario `interrupt` steps (real-shaped EventBridge events)
            elif fn.queue is not None:
                self.progress(f"function {fn.name}: queue {fn.queue!r} has no simulated source yet; not invoked")
            if fn.interval_seconds is not None:
                interval = self.lifecycle_interval if fn.name == "lifecycle" else fn.interval_seconds
                self.scheduled.append((fn.name, mod, interval))
            if fn.name == "lifecycle":
                self.lifecycle = mod
            if fn.name == "offpeak":
                self.offpeak = mod
        if self.provisioner is None:
            raise SimulationError("functions/registry.json: no function reads the pod queue")

    def _start_watcher(self, server, account, stop, root):
        path = root / "watcher"
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        from karpenter_lambda_watcher import watcher as w   # the checkout's watcher/: on sys.path only from now on
        from karpenter_lambda_watcher.kubeclient import KubeHTTP

        stats = w.Stats()
        sqs = boto3.client("sqs", region_name=self.region)
        api = KubeHTTP(server.url)   # the watcher's own client, as in a pod (docs/watcher.md)
        t = threading.Thread(target=w.run, name="sim-watcher", daemon=True,
                             args=(api, sqs, account.queue_url, self.cluster, stop),
                             kwargs={"flush_interval": 0.02, "stats": stats, "watch_timeout": 3600})
        t.start()
        stats.wait_for(lambda s: s.lists >= 1, timeout=10)
        return t, stats

    def _wait_watcher(self, limit: float = 5.0) -> None:
        """Real time: until the watcher has handled every pod change made so far and sent to SQS what it forwards
        (its counters say so: the pods resourceVersion it is synced to, no message unsent). At most ``limit``
        seconds: a watch a fault cut and not yet re-established is not waited for, as a controller would not."""
        target = self.server.store.last_change("pods")

        def caught_up(s) -> bool:
            rv = s.synced.get("pods")
            return rv is not None and int(rv) >= target and s.messages_unsent == 0

        self.watcher_stats.wait_for(caught_up, timeout=limit)

    def _receive(self, sqs) -> list[dict]:
        out = []
        while True:
            resp = sqs.receive_message(QueueUrl=self.account.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                       VisibilityTimeout=3600, AttributeNames=["All"], MessageAttributeNames=["All"])
            msgs = resp.get("Messages", [])
            if not msgs:
                return out
            out.extend(msgs)

    def _invoke_provisioner(self, sqs, batch: list[dict]) -> None:
        records = [sqs_record(m, self.account.queue_url, self.region) for m in batch]
        self.emit("ProvisionerInvoked", "function/provisioner", f"SQS batch of {len(records)} messages")
        try:
            response = self._call(self.provisioner.handler, {"Records": records}, "provisioner")
        finally:
            self._surface_pod_events()
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        for m in batch:
            mid = m["MessageId"]
            if mid in failed:
                n = self._receives[mid] = self._receives.get(mid, 0) + 1
                if n >= MAX_RECEIVES:
                    sqs.delete_message(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"])
                    sqs.send_message(QueueUrl=self.account.dlq_url, MessageBody=m["Body"])
                    self.emit("MessageDeadLettered", f"message/{mid}", f"failed {n} times: moved to the DLQ")
                else:
                    sqs.change_message_visibility(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                  VisibilityTimeout=0)
                    self.emit("RecordFailed", f"message/{mid}", "reported in batchItemFailures: will be redelivered")
                continue
            sqs.delete_message(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"])

    def _surface_pod_events(self) -> None:
        """The provisioner's new pod Events in the local API server (``Nominated``, ``FailedScheduling``) as
        ``PodNominated`` / ``PodFailedScheduling``: one line per distinct message, naming its pods (``pods``); a pod's
        outcome repeated by a later round is not repeated."""
        seen = self.__dict__.setdefault("_pod_events_seen", set())
        types = {kev.NOMINATED: "PodNominated", kev.FAILED_SCHEDULING: "PodFailedScheduling"}
        groups: dict[tuple[str, str], list[str]] = {}
        for e in self.server.store.list("events", shared=True):
            meta, ref = e.get("metadata") or {}, e.get("involvedObject") or {}
            ident = (meta.get("namespace"), meta.get("name"))
            if ident in seen or ref.get("kind") != "Pod" or e.get("reason") not in types:
                continue
            seen.add(ident)
            key = pod_key({"metadata": ref})
            last = self.__dict__.setdefault("_pod_event_last", {})
            if last.get(key) == (e["reason"], e.get("message")):   # a redelivery repeating the same outcome
                continue
            last[key] = (e["reason"], e.get("message"))
            groups.setdefault((types[e["reason"]], e.get("message") or ""), []).append(key)
        for (type_, message), pods in groups.items():
            pods = sorted(set(pods))
            obj = f"pod/{pods[0]}" if len(pods) == 1 else f"pods/{len(pods)}"
            self.emit(type_, obj, message if len(pods) == 1 else f"{len(pods)} pods: {message}", pods=pods)

    def _invoke_scheduled(self, name: str, mod) -> None:
        event = {"version": "0", "id": "sim", "detail-type": "Scheduled Event", "source": "aws.events",
                 "time": self.clock.isoformat(), "region": self.region, "resources": [], "detail": {}}
        self._call(mod.handler, event, name)

    def _call(self, fn, event, name):
        try:
            return self._call_handler(fn, event, name)
        finally:
            self._track_cost()
            settle_heap()

    def _call_handler(self, fn, event, name):
        sink = self.handler_logs if self.handler_logs is not None else io.StringIO()
        # the package's own loggers (e.g. "on-demand prices: Pricing API failed ... bundled table") go with the
        # handler logs, as they would to CloudWatch, not to the user's terminal
        pkg_log, log_handler = logging.getLogger("karpenter_lambda"), logging.StreamHandler(sink)
        pkg_log.addHandler(log_handler)
        try:
            with contextlib.redirect_stdout(sink):
                return fn(event, LambdaContext(f"{self.cluster}-{name}"))
        finally:
            pkg_log.removeHandler(log_handler)


def sqs_record(m: dict, queue_url: str, region: str) -> dict:
    """The record shape Lambda's SQS event source delivers."""
    name = queue_url.rstrip("/").rsplit("/", 1)[-1]
    return {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": m.get("Attributes") or {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000)),
                                              "SenderId": "AIDASIM", "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000))},
        "messageAttributes": m.get("MessageAttributes") or {},
        "md5OfBody": m.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{region}:123456789012:{name}",
        "awsRegion": region,
    }
