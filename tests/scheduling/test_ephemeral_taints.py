"""Karpenter's KnownEphemeralTaints (pkg/scheduling/taints.go): matched on key and effect, plus the readiness.k8s.io/
prefix with any effect; what a managed node that is not initialized yet does not hold against pods."""

import pytest

from karpenter_lambda.scheduling.inputs import is_ephemeral_taint, scheduling_taints


@pytest.mark.parametrize("taint, ephemeral", [
    ({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, True),
    ({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, True),
    ({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}, True),
    ({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, False),
    ({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}, True),
    ({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "false", "effect": "NoSchedule"}, True),
    ({"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "PreferNoSchedule"}, False),
    ({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}, True),
    ({"key": "karpenter.sh/unregistered", "effect": "NoSchedule"}, False),
    ({"key": "readiness.k8s.io/cni", "effect": "NoExecute"}, True),
    ({"key": "example.com/other", "effect": "NoSchedule"}, False),
    ({"effect": "NoSchedule"}, False),
])
def test_known_ephemeral_taints_match_key_and_effect(taint, ephemeral):
    assert is_ephemeral_taint(taint) is ephemeral


class _Claim:
    spec = {"startupTaints": [{"key": "agent", "effect": "NoSchedule"}]}

    @staticmethod
    def is_true(cond):
        return False


def test_an_uninitialized_node_keeps_only_its_ordinary_taints_for_scheduling():
    taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
              {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
              {"key": "agent", "effect": "NoSchedule"},
              {"key": "team", "value": "a", "effect": "NoSchedule"}]
    node = {"spec": {"taints": taints}}
    kept = scheduling_taints(node, _Claim())
    assert [t["key"] for t in kept] == ["node.kubernetes.io/unreachable", "team"]
    assert scheduling_taints(node) == taints   # not ours: as they are
