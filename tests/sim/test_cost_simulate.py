"""simulate's controlPlaneCost end to end: the real handlers counted where Lambda would bill them, nothing else."""

import textwrap

import pytest

from karpenter_lambda.sim.cost_render import cost_section, cost_text
from karpenter_lambda.sim.report import render_report
from karpenter_lambda.sim.simulator import Simulation

MANIFESTS = textwrap.dedent("""
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
""")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("cost") / "cluster.yaml"
    path.write_text(MANIFESTS)
    return Simulation([path], until=180.0).run()


def test_every_invocation_is_counted_with_its_memory_and_arm64(result):
    doc = result.to_dict()["controlPlaneCost"]
    fns = doc["functions"]
    provisioner_runs = sum(1 for e in result.events if e.type == "ProvisionerInvoked")
    assert provisioner_runs >= 1 and fns["provisioner"]["invocations"] == provisioner_runs
    assert fns["provisioner"]["memoryMb"] == 1769 and fns["lifecycle"]["memoryMb"] == 1024
    assert {f["architecture"] for f in fns.values()} == {"arm64"}
    # the lifecycle sweep every virtual minute of the 3: its month is one run a minute
    assert fns["lifecycle"]["invocations"] == 3 and fns["lifecycle"]["invocationsPerMonth"] == 43800.0
    for f in fns.values():
        if f["invocations"]:
            assert f["billedMs"] >= f["invocations"] and f["costPerMonth"] > 0


def test_only_the_functions_calls_are_counted_and_the_watcher_apart(result):
    doc = result.to_dict()["controlPlaneCost"]
    calls = doc["awsCalls"]
    # the provisioner launched through CreateFleet and read its state from DynamoDB
    assert calls.get("ec2:CreateFleet", 0) >= 1 and calls.get("dynamodb:Query", 0) >= 1
    # the simulator's loop receives from SQS (Lambda's event source does that): not a function's call
    assert "sqs:ReceiveMessage" not in calls
    # the watcher sent the pending pods to the queue: counted as its own SQS requests
    assert doc["sqs"]["watcherRequests"] >= 1
    assert doc["dynamodb"]["rru"] > 0 and doc["dynamodb"]["wru"] > 0
    assert doc["cloudwatch"]["metrics"] >= 1 and doc["logs"]["bytes"] > 0
    parts = sum(doc[k]["costPerMonth"] for k in ("lambda", "dynamodb", "sqs", "eventbridge", "cloudwatch", "logs", "xray"))
    assert doc["totalPerMonth"] == pytest.approx(parts, abs=1e-3)


def test_the_table_and_the_report_section(result):
    doc = result.to_dict()["controlPlaneCost"]
    text = cost_text(doc)
    assert "FUNCTION" in text and "provisioner" in text and f"${doc['totalPerMonth']:.2f} a month" in text
    html = render_report(result.to_dict())
    assert 'id="control-plane-cost"' in html and cost_section(doc) in html
    assert cost_text({}) == "" and cost_section(None) == ""
