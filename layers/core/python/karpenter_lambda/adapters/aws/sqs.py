"""Send pods to the pod queue in the watcher's message format (docs/watcher.md).

Used by the off-peak function to hand the pods of a restored NodePool to provisioning itself: at the end of a
``drain`` window the watcher may have been on a drained node, so the morning must not wait for it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

MAX_BATCH = 10                      # SendMessageBatch limit


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
        return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def send_pods(self, pods: list[dict]) -> tuple[int, list[str]]:
        """(messages sent, [problems]).  A failed entry is reported, not raised (the next run sends it again)."""
        sent, problems = 0, []
        for i in range(0, len(pods), MAX_BATCH):
            chunk = pods[i:i + MAX_BATCH]
            entries = [{"Id": str(n), "MessageBody": json.dumps({"type": "pod", "cluster": self.cluster,
                                                                  "sentAt": self._now(), "pod": _slim(p)})}
                       for n, p in enumerate(chunk)]
            resp = self.client.send_message_batch(QueueUrl=self.url, Entries=entries)
            sent += len(resp.get("Successful") or [])
            for f in resp.get("Failed") or []:
                pod = chunk[int(f["Id"])]
                m = pod.get("metadata") or {}
                problems.append(f"pod {m.get('namespace')}/{m.get('name')}: SQS {f.get('Code')}: {f.get('Message')}")
        return sent, problems
