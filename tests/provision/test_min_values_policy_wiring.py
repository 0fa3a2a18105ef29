"""The minValues policy (issue 30 item 6) from the setting to the launch: ``KARPENTER_LAMBDA_MIN_VALUES_POLICY``
reaches the provisioner's solve through the snapshot, and a relaxed NodeClaim carries Karpenter's annotation
(moto + the local Kubernetes API; the rules themselves: tests/scheduling/test_min_values_policy.py)."""

from __future__ import annotations

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

# a heavier NodePool whose instance-type list names 3 types of which only 2 exist, minValues 3
STRICT_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: picky}
spec:
  weight: 100
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.large, no-such.type], minValues: 3}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""


@pytest.mark.parametrize("policy, pool, relaxed", [("Strict", "default", "false"), ("BestEffort", "picky", "true")])
def test_the_policy_setting_decides_whether_min_values_is_relaxed(monkeypatch, policy, pool, relaxed):
    monkeypatch.setenv("KARPENTER_LAMBDA_MIN_VALUES_POLICY", policy)
    objs = load_text(scenario_manifests(), "<world>").objects + load_text(STRICT_POOL, "picky.yaml").objects
    with World(objs) as world:
        assert world.env.config.min_values_policy == policy
        resp = world.provision(world.sqs_event(world.add_pods([make_pod("web-0", cpu="1")])))
        assert resp == {"batchItemFailures": []}
        (nc,) = world.store.list("NodeClaim")
        assert nc.labels[L.NODEPOOL] == pool        # Strict: the picky NodePool cannot meet minValues 3
        assert nc.annotations[L.NODECLAIM_MIN_VALUES_RELAXED] == relaxed
