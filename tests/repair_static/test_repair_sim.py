"""Node repair end to end (issue 30 item 2): one ``simulate`` run, two NodePools of one node each; a Scenario
``nodeUnhealthy`` step makes both nodes NotReady at 3m, NodePool ``long``'s for 31 minutes and NodePool ``short``'s
for 29.  As in a cluster, the node controller's ``not-ready:NoExecute`` taint deletes both pods 5 minutes later
(their default 300 s toleration) and each gets a new node.  The ``long`` node is replaced once the 30-minute
toleration is over (one ``NodeClaimDisrupted`` with reason ``Unhealthy``, its NodeClaim deleted); the ``short`` one
recovers, is never repaired, and goes as an ordinary empty node."""

from __future__ import annotations

import pytest

from karpenter_lambda.sim.simulator import Simulation

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: NAME}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      nodeSelector: {karpenter.sh/nodepool: NAME}
      containers:
        - {name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}
---
"""

REST = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: node-repair}
spec:
  steps:
    - {at: 0s, nodeUnhealthy: {nodePool: long}}                      # no node registered yet: skipped
    - {at: 1m, nodeUnhealthy: {node: ip-10-9-9-9.ec2.internal}}      # no such node: skipped
    - {at: 3m, nodeUnhealthy: {nodePool: long, condition: Ready, status: "False", duration: 31m}}
    - {at: 3m, nodeUnhealthy: {nodePool: short, condition: Ready, status: "False", duration: 29m}}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    f = tmp_path_factory.mktemp("repair") / "repair.yaml"
    f.write_text(NODEPOOL.replace("NAME", "long") + NODEPOOL.replace("NAME", "short") + REST)
    return Simulation([f], progress=lambda m: None).run().to_dict()


def _of_pool(events: list[dict], pool: str, kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind and pool in e["object"]]


def test_the_pods_of_a_not_ready_node_move_after_their_toleration(run):
    events = run["events"]
    gone = [e for e in events if e["type"] == "PodEvicted"]
    assert len(gone) == 2 and {e["time"] for e in gone} == {180.0 + 300}           # 5 minutes after NotReady
    assert all("not-ready:NoExecute" in e["message"] for e in gone)
    for pool in ("long", "short"):                                                  # each pod gets a new node
        assert [e["time"] for e in _of_pool(events, pool, "NodeClaimLaunched")][1:] == [481.0]


def test_a_node_not_ready_for_31_minutes_is_replaced(run):
    events = run["events"]
    sick = [e for e in events if e["type"] == "NodeUnhealthy"]
    assert len(sick) == 2 and {e["time"] for e in sick} == {180.0}
    repaired = [e for e in events if e["type"] == "NodeClaimDisrupted" and e["reason"] == "Unhealthy"]
    assert len(repaired) == 1, repaired                                    # one event, one repair
    (rep,) = repaired
    assert rep["object"].startswith("nodeclaim/long-") and rep["nodePool"] == "long"
    assert "Ready=False" in rep["message"]
    # after the 30-minute toleration (Node times are whole seconds), at the next lifecycle sweep, before it recovers
    assert 180 + 30 * 60 - 1 <= rep["time"] < 180 + 31 * 60
    deleted = [e for e in events if e["type"] == "NodeClaimDeleted" and e["object"] == rep["object"]]
    assert deleted and deleted[0]["time"] >= rep["time"]
    assert run["pods"] == {"total": 2, "bound": 2}
    assert rep["object"].split("/", 1)[1] not in {nc["name"] for nc in run["nodeClaims"]}
    assert sum(1 for nc in run["nodeClaims"] if nc["name"].startswith("long-")) == 1


def test_a_node_not_ready_for_29_minutes_is_not_repaired(run):
    events = run["events"]
    healed = [e for e in events if e["type"] == "NodeHealthy"]
    assert len(healed) == 1 and healed[0]["time"] == 180 + 29 * 60       # the short one recovered
    first = _of_pool(events, "short", "NodeClaimLaunched")[0]["object"]
    assert not any(e["type"] == "NodeClaimDisrupted" and e["reason"] == "Unhealthy" and e["object"] == first
                   for e in events)
    # its pod moved at 8m: once Ready again it is an ordinary empty node, removed as such (WhenEmpty, 30s)
    (empty,) = [e for e in events if e["type"] == "NodeClaimDisrupted" and e["object"] == first]
    assert empty["reason"] == "Empty" and empty["time"] >= healed[0]["time"]
    assert sum(1 for nc in run["nodeClaims"] if nc["name"].startswith("short-")) == 1


def test_a_step_with_no_node_to_act_on_is_skipped_and_the_run_goes_on(run):
    skipped = [(e["time"], e["object"]) for e in run["events"] if e["type"] == "NodeUnhealthySkipped"]
    assert skipped == [(0.0, "nodepool/long"), (60.0, "node/ip-10-9-9-9.ec2.internal")]
    assert run["events"][-1]["type"] == "Done"
