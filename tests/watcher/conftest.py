"""Fixtures for the watcher: our local Kubernetes API server and moto SQS."""

import sys
import threading
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

WATCHER_DIR = Path(__file__).resolve().parents[2] / "watcher"
if str(WATCHER_DIR) not in sys.path:
    sys.path.insert(0, str(WATCHER_DIR))



@pytest.fixture
def kube(kube_api_server):
    return kube_api_server


@pytest.fixture
def sqs():
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1")
        yield client


@pytest.fixture
def queues(sqs):
    pods = sqs.create_queue(QueueName="pods")["QueueUrl"]
    events = sqs.create_queue(QueueName="events")["QueueUrl"]
    return pods, events


class WatcherThread:
    def __init__(self, api_client, sqs, pod_url, event_url=None, **kw):
        from karpenter_lambda_watcher import Stats, run

        self.stats = Stats()
        self.stop = threading.Event()
        kw.setdefault("backoff_base", 0.02)
        kw.setdefault("backoff_cap", 0.1)
        kw.setdefault("flush_interval", 0.05)
        kw.setdefault("watch_timeout", 30)
        self.thread = threading.Thread(
            target=run,
            args=(api_client, sqs, pod_url, "test-cluster", self.stop, event_url),
            kwargs={"stats": self.stats, **kw},
            daemon=True,
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "watcher did not stop"

    def wait(self, pred, timeout=10.0):
        ok = self.stats.wait_for(pred, timeout)
        assert ok, f"timed out; stats={self.stats.as_dict()} last_error={self.stats.last_error}"


@pytest.fixture
def start_watcher(kube, sqs):
    """Start the watcher against ``host`` (default: the local API server) through its own client (what it uses in a
    pod), or through the official client's ``ApiClient`` with ``official=True`` (a kubeconfig off a cluster)."""
    from karpenter_lambda_watcher.kubeclient import KubeHTTP

    clients = []

    def _start(pod_url, event_url=None, host=None, official=False, **kw):
        if official:
            from kubernetes import client as k8s

            api = k8s.ApiClient(k8s.Configuration(host=host or kube.url))
        else:
            api = KubeHTTP(host or kube.url)
        clients.append(api)
        return WatcherThread(api, sqs, pod_url, event_url, **kw)

    yield _start
    for c in clients:
        c.close()
