"""`simulate` surfaces the provisioner's pod Events (``Nominated``, ``FailedScheduling``) in its events list."""

import contextlib
import io
import json
import textwrap

from karpenter_lambda.cli.main import main

SCENARIO = textwrap.dedent("""
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          requirements:
            - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    ---
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      role: KarpenterNodeRole-sim
      amiSelectorTerms: [{alias: al2023@latest}]
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: default}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
            - {name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: huge, namespace: default}
    spec:
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "500"}}}
""")


def test_simulate_lists_pod_nominated_and_failed_scheduling(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["simulate", str(path), "--json", "--quiet", "--until", "3m"])
    doc = json.loads(out.getvalue())
    events = doc["events"]
    nominated = [e for e in events if e["type"] == "PodNominated"]
    failed = [e for e in events if e["type"] == "PodFailedScheduling"]
    claims = {nc["name"] for nc in doc["nodeClaims"]}
    assert nominated, [e["type"] for e in events]
    web = sorted(p for e in nominated for p in e["pods"])
    assert len(web) == 2 and all(p.startswith("default/web-") for p in web)
    assert all("Pod should schedule on: nodeclaim/" in e["message"] for e in nominated)
    assert {e["message"].rsplit("nodeclaim/", 1)[1] for e in nominated} <= claims
    (f,) = failed   # once, though the watcher re-sends the pod
    assert f["object"] == "pod/default/huge" and f["pods"] == ["default/huge"]
    assert f["message"].startswith("Failed to schedule pod, ")
    launched = next(e["time"] for e in events if e["type"] == "NodeClaimLaunched")
    assert min(e["time"] for e in nominated) >= launched
