#!/usr/bin/env python
"""Interruption latency: spot warning received -> replacement CreateFleet issued.

    python bench/interruption.py [--nodes 5] [--json]

Brings up ``--nodes`` spot nodes (2 pods of 900m each: full, so every warning needs a replacement) through the real provisioner and lifecycle handlers on moto + the
local Kubernetes API (``karpenter_lambda.sim.world.World``), then delivers one real-shaped "EC2 Spot Instance
Interruption Warning" per node through the real interruption handler (an SQS-shaped event, as the queue's event
source mapping delivers it).  Measured per warning: ``wall_seconds_to_createfleet`` (handler entry -> the launch of
the replacement, i.e. the CreateFleet call, wall clock, moto), ``handler_wall_seconds`` (the whole invocation) and
``virtual_seconds_to_createfleet`` (the same on the virtual clock: the handler runs when the message arrives, the
queue triggers it directly).  Target of the interruption issue: at most 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))

MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: spot}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, m6i]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: Never}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
"""


def run(n_nodes: int) -> dict:
    from karpenter_lambda.cloudprovider import launch as ec2_launch
    from karpenter_lambda.sim.interruption_events import spot_warning
    from karpenter_lambda.sim.simulator import _LambdaContext, _sqs_record, load_module, repo_root
    from karpenter_lambda.sim.world import World, make_pod

    launches: list[float] = []
    original = ec2_launch.launch

    def timed_launch(*a, **kw):   # the replacement's CreateFleet is issued inside launch()
        launches.append(time.perf_counter())
        return original(*a, **kw)

    rows = []
    with World(MANIFESTS) as w:
        handler = load_module(repo_root() / "functions" / "interruption" / "handler.py", "bench_interruption_handler")
        iids = []
        for n in range(n_nodes):
            pods = w.add_pods([make_pod(f"app{n}-{i}", cpu="900m", owner=f"app{n}", tolerate=False) for i in range(2)])
            before = {i["InstanceId"] for i in w.instances()}
            w.provision(w.sqs_event(pods))
            (inst,) = [i for i in w.instances() if i["InstanceId"] not in before]
            w.join(inst, ready=True)
            w.sweep()
            w.schedule()
            for nd in w.server.store.list("nodes"):   # the next node gets its own instance
                w.server.store.patch("nodes", nd["metadata"]["name"], {"spec": {"unschedulable": True}})
            iids.append(inst["InstanceId"])
        for nd in w.server.store.list("nodes"):
            w.server.store.patch("nodes", nd["metadata"]["name"], {"spec": {"unschedulable": None}})
        url = w.account.interruption_queue_url
        ec2_launch.launch = timed_launch
        try:
            for iid in iids:
                w.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(spot_warning(iid, w.clock.isoformat())))
                (m,) = w.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, AttributeNames=["All"])["Messages"]
                launches.clear()
                v0, t0 = w.clock.now(), time.perf_counter()
                with contextlib.redirect_stdout(w.logs):
                    resp = handler.handler({"Records": [_sqs_record(m, url, w.region)]}, _LambdaContext("bench-interruption"))
                t1 = time.perf_counter()
                rows.append({"instance": iid, "handler_wall_seconds": round(t1 - t0, 4),
                             "wall_seconds_to_createfleet": round(launches[0] - t0, 4) if launches else None,
                             "virtual_seconds_to_createfleet": round(w.clock.now() - v0, 3) if launches else None,
                             "failed": len(resp.get("batchItemFailures", []))})
                w.clock.advance(10)
        finally:
            ec2_launch.launch = original
    to_fleet = [r["wall_seconds_to_createfleet"] for r in rows if r["wall_seconds_to_createfleet"] is not None]
    handler_s = [r["handler_wall_seconds"] for r in rows]
    return {
        "warnings": len(rows), "replacements_launched": len(to_fleet),
        "wall_seconds_to_createfleet_median": round(statistics.median(to_fleet), 4) if to_fleet else None,
        "wall_seconds_to_createfleet_max": round(max(to_fleet), 4) if to_fleet else None,
        "virtual_seconds_to_createfleet_max": max((r["virtual_seconds_to_createfleet"] or 0.0) for r in rows) if rows else None,
        "handler_wall_seconds_median": round(statistics.median(handler_s), 4) if handler_s else None,
        "handler_wall_seconds_max": round(max(handler_s), 4) if handler_s else None,
        "target_seconds": 5.0, "per_warning": rows,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    row = run(a.nodes)
    if a.json:
        print(json.dumps(row), flush=True)
    else:
        print(f"{row['warnings']} spot warnings: replacement CreateFleet issued after {row['wall_seconds_to_createfleet_median']}s "
              f"(median, wall; max {row['wall_seconds_to_createfleet_max']}s; virtual {row['virtual_seconds_to_createfleet_max']}s); "
              f"handler {row['handler_wall_seconds_median']}s median")
    return row


if __name__ == "__main__":
    main()
