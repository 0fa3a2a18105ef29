"""`simulate` with NodeClaims in its files: manual NodeClaims (docs/provisioning.md, "Manual NodeClaims") are stored
at the start and launched by the real lifecycle sweep -- each launch a ``NodeClaimLaunched`` event, as every launch
is (docs/simulator.md) -- then register, initialize and take the pods that select them; one nothing can launch is
deleted with Karpenter's reason (a ``NodeClaimDeleted`` event)."""

import textwrap

from manifests import m5_on_demand_pool as M5_POOL

from karpenter_lambda.sim.simulator import Simulation

FILES = M5_POOL("sim-cluster") + "---\n" + textwrap.dedent("""\
    apiVersion: karpenter.sh/v1
    kind: NodeClaim
    metadata:
      name: manual-a
      labels: {team: data}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      resources:
        requests: {cpu: "3", memory: 4Gi}
      taints:
        - {key: example.com/manual, effect: NoSchedule}
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
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: data-0, namespace: default}
    spec:
      nodeSelector: {team: data}
      tolerations:
        - {key: example.com/manual, operator: Exists, effect: NoSchedule}
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "2", memory: 1Gi}}}
    """)


def test_given_nodeclaims_are_launched_by_the_lifecycle_sweep(tmp_path):
    path = tmp_path / "in.yaml"
    path.write_text(FILES)
    result = Simulation([str(path)], until=20 * 60).run()
    events = result.events
    (applied,) = [e for e in events if e.type == "Applied"]
    assert applied.message.endswith(", 2 NodeClaims")
    launched = [e for e in events if e.type == "NodeClaimLaunched"]
    assert [e.object for e in launched] == ["nodeclaim/manual-a"]      # the pod needs no other node
    assert launched[0].message.startswith("c5.xlarge on-demand in ")
    deleted = [e for e in events if e.type == "NodeClaimDeleted" and e.object == "nodeclaim/too-big"]
    assert len(deleted) == 1 and deleted[0].message.startswith(
        "InsufficientCapacity: all requested instance types were unavailable during launch")
    assert [e.object for e in events if e.type == "NodeClaimInitialized"] == ["nodeclaim/manual-a"]
    (nc,) = [c for c in result.to_dict()["nodeClaims"] if c["name"] == "manual-a"]
    assert nc["instanceType"] == "c5.xlarge" and nc["pods"] == ["default/data-0"]
    assert result.to_dict()["unschedulable"] == []
