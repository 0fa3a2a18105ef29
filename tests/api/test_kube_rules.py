"""Issue 31, the pure pieces: Kubernetes objects checked as the API server checks them (api/kubeschema.py,
api/kuberules.py, api/kuberules_objects.py), duplicates and Scenario steps across documents (api/crosscheck.py)."""

from __future__ import annotations

import pytest
import yaml

from karpenter_lambda.api.crosscheck import capacity_types, duplicates, scenario_step_errors
from karpenter_lambda.api.kuberules_objects import kube_errors
from karpenter_lambda.api.kubeschema import schema_version, schema_versions
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.quantity import quantity_problem


def _errors(text: str, version: str = "1.31") -> list[str]:
    return [str(e) for e in kube_errors(yaml.safe_load(text), version)]


@pytest.mark.parametrize("value,ok", [("500m", True), ("4Gi", True), ("1.5", True), (2, True), (0.5, True), ("1e3", True),
                                      ("12GB", False), ("half", False), (" 1", False), ("1 Gi", False), (True, False),
                                      ("", False), ([1], False)])
def test_quantity_grammar(value, ok):
    assert (quantity_problem(value) is None) is ok


def test_a_byte_suffix_gets_a_hint():
    assert quantity_problem("12GB").endswith("(did you mean 12G or 12Gi?)")
    assert quantity_problem("512mb").endswith("(did you mean 512M or 512Mi?)")


def test_schema_version_is_the_newest_not_newer_than_the_cluster():
    known = schema_versions()
    assert known[0].startswith("1.25") and len(known) >= 13
    assert schema_version("1.31") == "1.31.0"
    assert schema_version("v1.31.4") == "1.31.0"
    assert schema_version("9.99") == known[-1]     # a newer cluster: the newest schemas
    with pytest.raises(ValueError):
        schema_version("1.10")


POD = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: c
      image: busybox
      resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}
  tolerations:
    - {operator: Equal, value: x}
    - {key: k, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{key: a, operator: Exists, values: [x]}, {key: b, operator: Gt, values: ["1", "2"]}]
      preferredDuringSchedulingIgnoredDuringExecution:
        - {weight: 0, preference: {matchExpressions: [{key: c, operator: Equals, values: [x]}]}}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2, nodeTaintsPolicy: honor}
"""


def test_pod_rules_the_schema_cannot_say():
    assert _errors(POD) == [
        "spec.containers[0].resources.requests.cpu: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
        ".values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1]"
        ".values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator: "
        "Unsupported value: \"Equals\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
        "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means "
        "\"match all values and all keys\"",
        "spec.tolerations[1].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        "spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule",
        "spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: \"honor\": supported values: \"Honor\", \"Ignore\"",
    ]


def _container(resources: str) -> str:
    return ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      image: x\n"
            f"      resources: {resources}\n")


def test_a_misspelt_resource_name_is_refused_with_the_name_it_meant():
    # the API server refuses a container resource without a domain that is not a standard one: a typo is not a
    # resource nothing offers (which would leave the pod asking for no memory)
    assert _errors(_container("{requests: {cpu: 100m, memroy: 1Gi}, limits: {cpu: 1, mem: 1Gi}}")) == [
        'spec.containers[0].resources.limits[mem]: Invalid value: "mem": must be a standard resource for containers '
        '("cpu", "memory", "ephemeral-storage" or hugepages-<size>, or a name with a domain such as nvidia.com/gpu)',
        'spec.containers[0].resources.requests[memroy]: Invalid value: "memroy": must be a standard resource for '
        'containers ("cpu", "memory", "ephemeral-storage" or hugepages-<size>, or a name with a domain such as '
        'nvidia.com/gpu) (did you mean memory?)',
    ]
    ok = "{requests: {cpu: 1, memory: 1Gi, ephemeral-storage: 5Gi, hugepages-2Mi: 64Mi, nvidia.com/gpu: 1, " \
         "example.com/dongle: 2}, limits: {hugepages-2Mi: 64Mi, nvidia.com/gpu: 1, example.com/dongle: 2}}"
    assert _errors(_container(ok)) == []
    assert _errors(_container("{limits: {requests.example.com/x: 1, Bad_Domain/x: 1}}")) == [
        'spec.containers[0].resources.limits[requests.example.com/x]: Invalid value: "requests.example.com/x": '
        "doesn't follow extended resource name standard",
        'spec.containers[0].resources.limits[Bad_Domain/x]: Invalid value: "Bad_Domain/x": invalid label key '
        "'Bad_Domain/x': the prefix must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')",
    ]


def test_an_extended_resource_is_requested_only_with_an_equal_limit():
    # not overcommitable (an extended resource, huge pages): the API server wants the limit, and the same value
    assert _errors(_container("{requests: {nvidia.com/gpu: 1}}")) == [
        "spec.containers[0].resources.limits[nvidia.com/gpu]: Required value: Limit must be set for non overcommitable "
        "resources"]
    assert _errors(_container("{requests: {nvidia.com/gpu: 1, hugepages-1Gi: 1Gi}, "
                              "limits: {nvidia.com/gpu: 2, hugepages-1Gi: 2Gi}}")) == [
        'spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: 1: must be equal to nvidia.com/gpu '
        "limit of 2",
        'spec.containers[0].resources.requests.hugepages-1Gi: Invalid value: "1Gi": must be equal to hugepages-1Gi '
        "limit of 2Gi",
    ]
    # a native resource may be requested below its limit, or with none
    assert _errors(_container("{requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 2}}")) == []


def test_a_valid_workload_has_no_error():
    text = ("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db, labels: {app.kubernetes.io/name: db}}\nspec:\n"
            "  serviceName: db\n  replicas: 3\n  selector: {matchExpressions: [{key: app, operator: In, values: [db]}]}\n"
            "  template:\n    metadata: {labels: {app: db}}\n    spec:\n      containers: [{name: db, image: postgres, "
            "resources: {requests: {cpu: 250m, memory: 1Gi}, limits: {memory: 1Gi}}}]\n"
            "  volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], "
            "resources: {requests: {storage: 10Gi}}}}]\n")
    assert _errors(text) == []


def test_selector_must_select_the_template():
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: web}}\n"
            "  template:\n    metadata: {labels: {app: api}}\n    spec: {containers: [{name: c, image: x}]}\n")
    assert _errors(text) == ['spec.template.metadata.labels: Invalid value: {"app": "api"}: `selector` does not match template `labels`']


def test_a_field_the_schema_refused_is_not_reported_again_by_a_rule():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n  tolerations: {key: a}\n"
    assert _errors(text) == ["spec.tolerations: Invalid value: an object: must be a list"]


@pytest.mark.parametrize("spec,message", [
    ("{minAvailable: 1, maxUnavailable: 1, selector: {}}", "spec: Invalid value: minAvailable and maxUnavailable cannot be both set"),
    ("{maxUnavailable: 120%, selector: {}}", 'spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%'),
    ("{minAvailable: half, selector: {}}", 'spec.minAvailable: Invalid value: "half": a valid percent string must be a numeric string followed by an ending \'%\''),
    ("{minAvailable: -1, selector: {}}", "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
    ("{minAvailable: 1, selector: {matchExpressions: [{key: app, operator: Exists, values: [a]}]}}",
     "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
])
def test_pdb_rules(spec, message):
    errors = _errors(f"apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: b}}\nspec: {spec}\n")
    assert len(errors) == 1 and errors[0].startswith(message), errors


def test_storage_kinds():
    assert _errors("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec:\n  capacity: {storage: 10GB}\n"
                   "  accessModes: [ReadWriteOnce]\n  nodeAffinity: {required: {nodeSelectorTerms: []}}\n") == [
        "spec.capacity.storage: Invalid value: \"10GB\": must be a quantity such as 500m, 2, 4Gi or 512M (suffixes: m, k, M, "
        "G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) (did you mean 10G or 10Gi?)",
        "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term"]
    assert _errors("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\nprovisioner: ebs.csi.aws.com\n"
                   "volumeBindingMode: WaitForFirstConsumr\n") == [
        'volumeBindingMode: Unsupported value: "WaitForFirstConsumr": supported values: "Immediate", "WaitForFirstConsumer"']


def test_custom_kinds_have_no_schema_and_no_error():
    assert _errors("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {anything: [1, 2]}\n") == []


def test_load_text_refuses_and_drops_the_bad_object_with_lines():
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n  nodeSelecter: {a: b}\n"
    result = load_text(text, "p.yaml", allow_other_kinds=True)
    assert [str(i) for i in result.issues] == ['p.yaml:0: Pod/p: spec.nodeSelecter: unknown field "nodeSelecter" (did you mean "nodeSelector"?)']
    assert result.issues[0].line == 6 and result.objects == []


def test_duplicates_ignore_the_api_version_but_not_the_group_or_namespace():
    docs = [("a:0", {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}}),
            ("b:0", {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": {"name": "x", "namespace": "y"}}),
            ("c:0", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}),
            ("c:1", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "other"}}),
            ("c:2", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}),
            ("d:0", {"apiVersion": "example.com/v1", "kind": "NodePool", "metadata": {"name": "x"}})]
    assert duplicates(docs) == {1: "a:0", 4: "c:0"}


def test_a_v1beta1_duplicate_does_not_reach_the_conversion():
    v1 = ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: R\n"
          "  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {a: b}}]\n"
          "  securityGroupSelectorTerms: [{tags: {a: b}}]\n")
    v1beta1 = ("apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: R\n"
               "  amiFamily: AL2\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n")
    result = load_text(v1 + "---\n" + v1beta1, "x.yaml")
    assert [str(i) for i in result.issues] == ["x.yaml:1: EC2NodeClass/default: duplicate of x.yaml:0"]
    assert result.warnings == [] and [o.api_version for o in result.objects] == ["karpenter.k8s.aws/v1"]


def _pool(*reqs: dict, label: str | None = None) -> dict:
    template: dict = {"spec": {"requirements": list(reqs)}}
    if label:
        template["metadata"] = {"labels": {"karpenter.sh/capacity-type": label}}
    return {"spec": {"template": template}}


def test_capacity_types_a_nodepool_allows():
    ct = "karpenter.sh/capacity-type"
    assert capacity_types(_pool()) == {"on-demand", "spot", "reserved"}
    assert capacity_types(_pool({"key": ct, "operator": "In", "values": ["on-demand"]})) == {"on-demand"}
    assert capacity_types(_pool({"key": ct, "operator": "NotIn", "values": ["spot"]})) == {"on-demand", "reserved"}
    assert capacity_types(_pool({"key": ct, "operator": "DoesNotExist"})) == set()
    assert capacity_types(_pool(label="spot")) == {"spot"}


def test_scenario_steps_against_nodepools():
    scenario = {"spec": {"steps": [
        {"at": "1m", "interrupt": {"kind": "RebalanceRecommendation", "nodePool": "od"}},
        {"at": "2m", "interrupt": {"kind": "CapacityReservationInterruption", "nodePool": "spot"}},
        {"at": "3m", "interrupt": {"kind": "ScheduledChange", "nodePool": "od"}},
        {"at": "4m", "delete": {"kind": "NodePool", "name": "gone"}},
    ]}}
    pools = {"od": _pool({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}),
             "spot": _pool({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]})}
    errors = scenario_step_errors(scenario, pools)
    assert [(e.path, e.message.split(":")[0]) for e in errors] == [
        ("spec.steps[0].interrupt.kind", "step 0 (interrupt at 1m)"),
        ("spec.steps[1].interrupt.kind", "step 1 (interrupt at 2m)"),
        ("spec.steps[3].delete.name", "step 3 (delete at 4m)")]
    assert "allow no reserved capacity" in errors[1].message
    assert scenario_step_errors(scenario, {}) == []   # a Scenario on its own: nothing to check against


def test_without_the_schema_package_the_rules_still_apply(monkeypatch):
    """The Lambda layer does not ship kubernetes-validate: no schema check there, the API server's rules still run."""
    from karpenter_lambda.api import kubeschema

    monkeypatch.setattr(kubeschema, "available", lambda: False)
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  afinity: {}\n"
            "  containers: [{name: c, image: x, resources: {requests: {memory: 12GB}}}]\n")
    errors = _errors(text)
    assert len(errors) == 1 and errors[0].startswith('spec.containers[0].resources.requests.memory: Invalid value: "12GB"')


STATEFUL = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnse], resources: {requests: {storage: 10GB}}}
    - metadata: {name: logs}
      spec: {resources: {requests: {}}}
"""


def test_a_statefulset_claim_template_is_checked_as_the_claims_made_from_it():
    # the API server takes the StatefulSet but refuses each claim its controller makes: the pods never start
    suffix = " (the PersistentVolumeClaims made from this template are refused: the StatefulSet's pods would never start)"
    assert _errors(STATEFUL) == [
        'spec.volumeClaimTemplates[0].spec.accessModes[0]: Unsupported value: "ReadWriteOnse": supported values: '
        '"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"' + suffix,
        'spec.volumeClaimTemplates[0].spec.resources.requests.storage: Invalid value: "10GB": must be a quantity such '
        "as 500m, 2, 4Gi or 512M (suffixes: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) (did you mean 10G or 10Gi?)"
        + suffix,
        "spec.volumeClaimTemplates[1].spec.accessModes: Required value: at least 1 access mode is required" + suffix,
        "spec.volumeClaimTemplates[1].spec.resources[storage]: Required value" + suffix,
    ]


def test_a_claim_needs_an_access_mode_and_a_storage_request_above_zero():
    claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: %s\n"
    assert _errors(claim % "{accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}") == []
    assert _errors(claim % "{resources: {requests: {storage: '0'}}}") == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        'spec.resources[storage]: Invalid value: "0": must be greater than zero']


def test_a_count_beyond_int32_is_refused_as_the_api_server_cannot_decode_it():
    deployment = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: %s\n"
                  "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
                  "    spec: {containers: [{name: c, image: x}]}\n")
    assert _errors(deployment % 2147483647) == []
    assert _errors(deployment % 99999999999) == [
        "spec.replicas: Invalid value: 99999999999: must fit in a 32-bit integer (at most 2147483647): the API server "
        "cannot decode it"]
