"""api/pool_hints.py: a workload one typo off the taints and labels of the NodePools given is a warning at the
field; near misses only, and none for a taint another toleration of the pod does tolerate."""

from __future__ import annotations

import yaml

from karpenter_lambda.api.pool_hints import nodepool_hints

POOLS = [yaml.safe_load("""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    metadata: {labels: {accelerator: nvidia}}
    spec:
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
      requirements:
        - {key: team, operator: In, values: [ml, research]}
        - {key: tier, operator: Exists}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu}
"""), yaml.safe_load("""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: batch}
spec:
  template:
    spec:
      taints: [{key: dedicated, value: batch, effect: NoSchedule}]
      requirements: [{key: team, operator: In, values: [data]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
""")]


def _hints(spec: dict) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in nodepool_hints(spec, "spec", POOLS)]


def test_toleration_near_misses():
    spec = {"tolerations": [{"key": "nvidia.com/gpus", "operator": "Exists"},
                            {"key": "dedicated", "operator": "Equal", "value": "batc"},
                            {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoExecute"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}
    assert _hints(spec) == [
        ("spec.tolerations[0].key", "toleration key nvidia.com/gpus matches no taint of the NodePools given, so their "
                                    "taint nvidia.com/gpu=true:NoSchedule is not tolerated (did you mean "
                                    "nvidia.com/gpu?)"),
        ("spec.tolerations[1].value", "toleration dedicated=batc matches no taint of the NodePools given "
                                      "(dedicated=batch:NoSchedule) (did you mean batch?)"),
        ("spec.tolerations[2].effect", "toleration of dedicated only for effect NoExecute: the NodePools' taint "
                                       "dedicated=batch:NoSchedule is not tolerated (leave effect empty to tolerate "
                                       "every effect)"),
    ]


def test_no_warning_where_the_taint_is_tolerated_or_the_key_is_far():
    both_effects = {"tolerations": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
                                    {"key": "dedicated", "value": "batch", "effect": "NoExecute",
                                     "tolerationSeconds": 60}]}
    assert _hints(both_effects) == []
    assert _hints({"tolerations": [{"operator": "Exists"}, {"key": "nvidia.com/gpus", "operator": "Exists"}]}) == []
    assert _hints({"tolerations": [{"key": "example.com/other", "operator": "Exists"}]}) == []
    assert nodepool_hints({"tolerations": [{"key": "nvidia.com/gpus", "operator": "Exists"}]}, "spec", []) == []


def test_label_near_misses():
    spec = {"nodeSelector": {"acelerator": "nvidia", "team": "ml", "kubernetes.io/arch": "amd64"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "team", "operator": "In", "values": ["dta", "rsearch"]},
                                      {"key": "team", "operator": "In", "values": ["ml", "dta"]},
                                      {"key": "tier", "operator": "In", "values": ["gold"]},
                                      {"key": "accelerator", "operator": "In", "values": ["amd"]}]}]}}}}
    assert _hints(spec) == [
        ("spec.nodeSelector[acelerator]", "no NodePool given labels its nodes acelerator (did you mean accelerator?)"),
        ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0]", "no NodePool given labels its nodes team=dta, rsearch: their values are data, ml, "
                                 "research (did you mean data or research?)"),
    ]   # [1]: ml is a value; [2]: tier takes any value; [3]: amd is no typo of nvidia


def test_a_spread_key_no_nodepool_puts_on_its_nodes():
    spec = {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"},   # a preference: no warning
        {"maxSkew": 1, "topologyKey": "tire", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 1, "topologyKey": "tier", "whenUnsatisfiable": "DoNotSchedule"},     # the gpu NodePool's
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]}
    assert _hints(spec) == [
        ("spec.topologySpreadConstraints[0].topologyKey",
         "no NodePool given labels its nodes rack: a node without it cannot take these pods (whenUnsatisfiable: "
         "DoNotSchedule), so none Karpenter launches can (add it to a NodePool's labels or requirements)"),
        ("spec.topologySpreadConstraints[2].topologyKey",
         "no NodePool given labels its nodes tire: a node without it cannot take these pods (whenUnsatisfiable: "
         "DoNotSchedule), so none Karpenter launches can (did you mean tier?)"),
    ]
