#!/usr/bin/env python3
"""Idle memory of the watcher: `python bench/watcher_rss.py [--pods N] [--seconds S] [--json]`.

Runs the real watcher (`python -m karpenter_lambda_watcher`, a separate process
that imports only kubernetes + boto3) against the local Kubernetes API server
(sim/kubeapi/, in this process) and moto_server (SQS), with N pending pods
and a few nodes, lets it forward them, waits S seconds of idleness, and
reports the watcher process's resident memory from /proc.

JSON: {"idle_rss_mb", "peak_rss_mb", "pods", "nodes", "messages_received", "seconds", "target_mb": 64, "ok"}
(``ok``: every pod forwarded and the idle RSS within the target; the exit status is 1 otherwise.)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_MB = 64
sys.path.insert(0, str(REPO / "layers" / "core" / "python"))


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _rss_mb(pid: int) -> tuple[float, float]:
    rss = hwm = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=3.0, help="idle time after the pods are forwarded")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import boto3

    from karpenter_lambda.sim.kubeapi import KubeAPIServer
    from karpenter_lambda.sim.nodes import make_node

    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    moto_port = _free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(moto_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    kube = KubeAPIServer()
    url = kube.start()
    watcher = None
    try:
        endpoint = f"http://127.0.0.1:{moto_port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=0.5)
                break
            except OSError:
                time.sleep(0.1)
        sqs = boto3.client("sqs", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing")
        pod_q = sqs.create_queue(QueueName="pods")["QueueUrl"]
        ev_q = sqs.create_queue(QueueName="events")["QueueUrl"]
        for i in range(args.nodes):
            kube.store.create("nodes", make_node(f"node-{i}", f"aws:///us-east-1a/i-{i:08x}", "m5.large", "us-east-1a", {"cpu": "2", "memory": "8Gi"}, ready=True))
        for i in range(args.pods):
            kube.store.create(
                "pods",
                {
                    "metadata": {"name": f"pod-{i}", "namespace": "default", "labels": {"app": f"app-{i % 10}"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]},
                    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/20 nodes are available"}]},
                },
            )
        wenv = dict(
            env,
            PYTHONPATH=str(REPO / "watcher"),
            KUBE_API_URL=url,
            SQS_ENDPOINT_URL=endpoint,
            POD_QUEUE_URL=pod_q,
            EVENT_QUEUE_URL=ev_q,
            CLUSTER_NAME="bench",
            HEALTH_PORT="0",
            LOG_LEVEL="WARNING",
            MALLOC_ARENA_MAX=os.environ.get("MALLOC_ARENA_MAX", "2"),  # as the Dockerfile sets it
        )
        watcher = subprocess.Popen([sys.executable, "-m", "karpenter_lambda_watcher"], env=wenv, stdout=subprocess.DEVNULL)
        deadline = time.time() + 60 + args.pods / 20  # moto_server takes ~0.1 s per SendMessageBatch here
        received = 0
        while time.time() < deadline:
            attrs = sqs.get_queue_attributes(QueueUrl=pod_q, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            received = int(attrs["ApproximateNumberOfMessages"])
            if received >= args.pods:
                break
            if watcher.poll() is not None:
                raise SystemExit(f"watcher exited with {watcher.returncode}")
            time.sleep(0.2)
        time.sleep(args.seconds)
        rss, hwm = _rss_mb(watcher.pid)
        out = {
            "idle_rss_mb": round(rss, 1),
            "peak_rss_mb": round(hwm, 1),
            "pods": args.pods,
            "nodes": args.nodes,
            "messages_received": received,
            "seconds": args.seconds,
            "target_mb": TARGET_MB,
            "ok": received >= args.pods and rss <= TARGET_MB,
            "malloc_arena_max": wenv["MALLOC_ARENA_MAX"],
        }
    finally:
        if watcher is not None:
            watcher.terminate()
            try:
                watcher.wait(10)
            except subprocess.TimeoutExpired:
                watcher.kill()
        kube.stop()
        moto.terminate()
        moto.wait(10)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"watcher idle RSS {out['idle_rss_mb']} MB (peak {out['peak_rss_mb']} MB) after forwarding {received}/{args.pods} pods; target <= {TARGET_MB} MB")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
