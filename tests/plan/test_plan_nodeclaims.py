"""`plan` with NodeClaims in its files (manual NodeClaims, launched as they are: docs/provisioning.md): each is
reported with what it would launch as and offered to the pending pods as in-flight capacity, so pods that fit there
need no new node; one nothing can launch is reported with the reason the lifecycle sweep deletes it for."""

import json
import textwrap

from karpenter_lambda.cli.main import main

BASE = textwrap.dedent("""\
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      role: KarpenterNodeRole-test
      amiSelectorTerms: [{alias: al2023@latest}]
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
    ---
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      replicas: 4
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
            - {name: c, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}
    """)

NODECLAIMS = textwrap.dedent("""\
    ---
    apiVersion: karpenter.sh/v1
    kind: NodeClaim
    metadata: {name: manual-a}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      resources:
        requests: {cpu: "3"}
    ---
    apiVersion: karpenter.sh/v1
    kind: NodeClaim
    metadata: {name: too-big}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}
      resources:
        requests: {cpu: "1000"}
    """)


def _plan(capsys, tmp_path, text, *flags):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    code = main(["plan", *flags, str(path)])
    out = capsys.readouterr().out
    return code, out


def test_given_nodeclaims_are_in_flight_capacity_and_reported(capsys, tmp_path):
    code, out = _plan(capsys, tmp_path, BASE, "--json")
    alone = json.loads(out)
    assert code == 0 and alone["givenNodeClaims"] == []
    assert sum(len(c["pods"]) for c in alone["nodeClaims"]) == 4

    code, out = _plan(capsys, tmp_path, BASE + NODECLAIMS, "--json")
    data = json.loads(out)
    assert code == 0 and data["unschedulable"] == []
    given = {g["name"]: g for g in data["givenNodeClaims"]}
    a = given["manual-a"]
    assert a["launchable"] and a["instanceType"] == "c5.xlarge" and a["capacityType"] == "on-demand"
    assert a["instanceTypes"][0] == "c5.xlarge" and all(t.startswith("c5.") for t in a["instanceTypes"])
    assert "c5.metal" not in a["instanceTypes"]           # exotic types left out while generic ones remain
    assert len(a["pods"]) == 3                             # 3 of the 4 one-CPU pods fit its 3920m
    assert data["existing"]["manual-a"] == a["pods"]
    assert sum(len(c["pods"]) for c in data["nodeClaims"]) == 1   # only the fourth needs a new node
    b = given["too-big"]
    assert not b["launchable"] and b["pods"] == []
    assert b["reason"].startswith("InsufficientCapacity: all requested instance types were unavailable during launch")

    code, out = _plan(capsys, tmp_path, BASE + NODECLAIMS)
    assert code == 0
    assert "GIVEN NODECLAIM" in out and "manual-a" in out and "too-big: not launched: InsufficientCapacity" in out
    assert "1 of 2 given NodeClaim(s) launched as they are, $0.1700/h" in out


def test_a_nodeclaim_without_its_nodeclass_in_the_files_is_reported(capsys, tmp_path):
    text = BASE + NODECLAIMS.replace("name: default}\n  requirements", "name: other}\n  requirements", 1)
    code, out = _plan(capsys, tmp_path, text, "--json")
    data = json.loads(out)
    (a,) = [g for g in data["givenNodeClaims"] if g["name"] == "manual-a"]
    assert code == 0 and not a["launchable"] and "EC2NodeClass 'other' is not in the given files" in a["reason"]
    assert sum(len(c["pods"]) for c in data["nodeClaims"]) == 4
