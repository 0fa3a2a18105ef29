"""Helpers shared by the watcher tests."""


def drain(sqs, url):
    """Every message body in the queue (parsed), deleting them."""
    import json

    out = []
    while True:
        resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        msgs = resp.get("Messages") or []
        if not msgs:
            return out
        for m in msgs:
            out.append(json.loads(m["Body"]))
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)])


def pending_pod(name, ns="default", **extra):
    pod = {
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}],
        },
    }
    for k, v in extra.items():
        pod[k].update(v) if isinstance(v, dict) and k in pod else pod.__setitem__(k, v)
    return pod


class FakeClock:
    """A monotonic clock the test moves by hand (the watcher's ``clock`` keyword)."""

    def __init__(self, start=1000.0):
        import threading

        self._t = start
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            return self._t

    def advance(self, seconds):
        with self._lock:
            self._t += seconds
