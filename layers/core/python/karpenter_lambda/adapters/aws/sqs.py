"""Send pods to the pod queue in the watcher's message format (docs/watcher.md).

Used by the off-peak function to hand the pods of a restored NodePool to provisioning itself: at the end of a
``drain`` window the watcher may have been on a drained node, so the morning must not wait for it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from ...api.times import format_time

MAX_BATCH = 10                      # SendMessageBatch: at most 10 entries
MAX_BATCH_BYTES = 256 * 1024        # SendMessageBatch: the entries' bodies together (and one message) <= 256 KiB


def _slim(pod: dict) -> dict:
    d = json.loads(json.dumps(pod))
    (d.get("metadata") or {}).pop("managedFields", None)
    return d


class PodQueue:
    def __init__(self, client, url: str, cluster: str, clock=None):
        self.client = client
        self.url = url
        self.cluster = cluster
        self.clock = clock

    def _now(self) -> str:
        t = self.clock() if self.clock else datetime.now(timezone.utc).timestamp()
        return format_time(t)

    def send_pods(self, pods: list[dict]) -> tuple[int, list[str]]:
        """(messages sent, [problems]).  A failed entry is reported, not raised (the next run sends it again).

        Batches hold at most 10 entries and 256 KiB of bodies together (SQS's limits); a pod whose message alone is
        over 256 KiB is not sent and is reported by name and size (the provisioner gets it from the watcher's
        resync, which slims pods the same way)."""
        sent, problems = 0, []
        batch: list[tuple[dict, str]] = []
        size = 0
        for p in pods:
            body = json.dumps({"type": "pod", "cluster": self.cluster, "sentAt": self._now(), "pod": _slim(p)})
            n = len(body.encode())
            if n > MAX_BATCH_BYTES:
                m = p.get("metadata") or {}
                problems.append(f"pod {m.get('namespace')}/{m.get('name')}: message of {n} bytes is over SQS's "
                                f"{MAX_BATCH_BYTES}-byte limit; not sent")
                continue
            if batch and (len(batch) == MAX_BATCH or size + n > MAX_BATCH_BYTES):
                sent += self._send(batch, problems)
                batch, size = [], 0
            batch.append((p, body))
            size += n
        if batch:
            sent += self._send(batch, problems)
        return sent, problems

    def _send(self, batch: list[tuple[dict, str]], problems: list[str]) -> int:
        entries = [{"Id": str(n), "MessageBody": body} for n, (_p, body) in enumerate(batch)]
        resp = self.client.send_message_batch(QueueUrl=self.url, Entries=entries)
        for f in resp.get("Failed") or []:
            m = batch[int(f["Id"])][0].get("metadata") or {}
            problems.append(f"pod {m.get('namespace')}/{m.get('name')}: SQS {f.get('Code')}: {f.get('Message')}")
        return len(resp.get("Successful") or [])
