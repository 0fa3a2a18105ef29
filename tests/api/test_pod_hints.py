"""Warnings for node labels no node has (api/pod_hints.py): a typo of a well-known key or of a closed set's value
in a pod's node selector, node affinity or topology keys; nothing for what nodes can have."""

from __future__ import annotations

import yaml

from karpenter_lambda.api.pod_hints import pod_spec_hints
from karpenter_lambda.api.text import one_edit

SPEC = """
nodeSelector: {kubernetes.io/arch: amd46, karpenter.sh/capacity-typ: spot, team: data}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: karpenter.sh/capacity-type, operator: In, values: [Spot, on-demand]}
            - {key: kubernetes.io/os, operator: NotIn, values: [linx]}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        preference: {matchExpressions: [{key: topology.kubernetes.io/zome, operator: In, values: [us-east-1a]}]}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostnme}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        podAffinityTerm: {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zon, whenUnsatisfiable: DoNotSchedule, labelSelector: {}}
  - {maxSkew: 1, topologyKey: rack, whenUnsatisfiable: DoNotSchedule, matchLabelKeys: [pod-template-hash]}
"""


def test_each_typo_is_one_warning_at_its_field():
    found = [(e.path, e.message) for e in pod_spec_hints(yaml.safe_load(SPEC), "spec")]
    assert found == [
        ("spec.nodeSelector[kubernetes.io/arch]",
         "no node has kubernetes.io/arch=amd46: its values on AWS nodes are amd64, arm64 (did you mean amd64?)"),
        ("spec.nodeSelector[karpenter.sh/capacity-typ]",
         "no node karpenter-lambda launches has the label karpenter.sh/capacity-typ (did you mean "
         "karpenter.sh/capacity-type?)"),
        ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].values",
         "no node has karpenter.sh/capacity-type=Spot: its values on AWS nodes are on-demand, spot, reserved "
         "(did you mean spot?)"),
        ("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
         ".matchExpressions[0].key",
         "no node karpenter-lambda launches has the label topology.kubernetes.io/zome (did you mean "
         "topology.kubernetes.io/zone?)"),
        ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
         "no node karpenter-lambda launches has the label kubernetes.io/hostnme (did you mean "
         "kubernetes.io/hostname?)"),
        ("spec.topologySpreadConstraints[0].topologyKey",
         "no node karpenter-lambda launches has the label topology.kubernetes.io/zon (did you mean "
         "topology.kubernetes.io/zone?)"),
    ]


def test_what_nodes_can_have_is_not_warned():
    spec = {"nodeSelector": {"kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux", "team": "x",
                             "karpenter.k8s.aws/instance-family": "m5"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "NotIn", "values": ["windows"]},
                                      {"key": "topology.ebs.csi.aws.com/zone", "operator": "In",
                                       "values": ["us-east-1a"]}]}]}}},
            "topologySpreadConstraints": [{"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {}},
                                          {"topologyKey": "rack", "labelSelector": {"matchLabels": {"app": "x"}}}]}
    assert pod_spec_hints(spec, "spec") == []
    # a deprecated alias is held to its current key's values
    [e] = pod_spec_hints({"nodeSelector": {"beta.kubernetes.io/arch": "x86_64"}}, "spec")
    assert e.message.startswith("no node has beta.kubernetes.io/arch=x86_64: its values on AWS nodes are amd64, arm64")
    assert pod_spec_hints("not a spec", "spec") == [] and pod_spec_hints({"affinity": [1]}, "spec") == []


def test_one_edit():
    assert one_edit("memroy", "memory") and one_edit("zon", "zone") and one_edit("zonee", "zone")
    assert one_edit("zome", "zone") and not one_edit("zone", "zone") and not one_edit("rack", "zone")


def test_a_term_without_a_selector_selects_no_pods():
    spec = yaml.safe_load("""
affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: topology.kubernetes.io/zone}
    preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname}}
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: kubernetes.io/hostname, matchLabelKeys: [pod-template-hash]}
      - {topologyKey: kubernetes.io/hostname}
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
""")
    prefix = "no labelSelector: the scheduler reads it as selecting no pods, so "
    assert [(e.path, e.message) for e in pod_spec_hints(spec, "spec")] == [
        ("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector",
         prefix + "the pod can never be placed (not even beside itself)"),
        ("spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector",
         prefix + "this preference has no effect"),
        ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[1].labelSelector",
         prefix + "it keeps nothing apart"),
        ("spec.topologySpreadConstraints[0].labelSelector", prefix + "it spreads nothing"),
    ]


def test_requirements_that_exclude_each_other_are_warned_per_term():
    spec = yaml.safe_load("""
nodeSelector: {topology.ebs.csi.aws.com/zone: us-east-1a, team: data}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1b, us-east-1c]}]
        - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]},
                             {key: kubernetes.io/arch, operator: NotIn, values: [arm64]}]
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]},
                             {key: team, operator: NotIn, values: [web]}]
""")
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    assert [(e.path, e.message) for e in pod_spec_hints(spec, "spec")] == [
        (f"{where}[0]", "requirements that exclude each other (topology.kubernetes.io/zone In [us-east-1a] "
                        "(nodeSelector) and topology.kubernetes.io/zone In [us-east-1b us-east-1c]): no node satisfies "
                        "them, this term can never be met"),
        (f"{where}[1]", "requirements that exclude each other (kubernetes.io/arch In [arm64] and kubernetes.io/arch "
                        "NotIn [arm64]): no node satisfies them, this term can never be met"),
    ]
    one = {"nodeSelector": {"kubernetes.io/arch": "amd64"}, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]}}}}
    (e,) = pod_spec_hints(one, "spec")
    assert e.message.endswith("no node satisfies them, the pod never schedules")
    # what one node can satisfy: nothing (Exists / DoesNotExist / Gt are not compared)
    fine = {"nodeSelector": {"kubernetes.io/arch": "amd64"}, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
            {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4"]}]}]}}}}
    assert pod_spec_hints(fine, "spec") == []


def test_a_spread_whose_selector_misses_the_pods_own_labels_is_warned():
    spec = yaml.safe_load("""
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
     labelSelector: {matchLabels: {app: wev}}}
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway,
     labelSelector: {matchExpressions: [{key: app, operator: In, values: [web, api]}]}}
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway,
     labelSelector: {matchExpressions: [{key: tier, operator: Exists}]}}
""")
    found = [(e.path, e.message) for e in pod_spec_hints(spec, "spec.template.spec", {"app": "web"})]
    assert found == [
        ("spec.template.spec.topologySpreadConstraints[0].labelSelector",
         "topologySpreadConstraints[0].labelSelector app=wev selects none of this workload's own pods (labels app=web): "
         "only other pods are counted, its own replicas are not spread (a typo?)"),
        ("spec.template.spec.topologySpreadConstraints[2].labelSelector",
         "topologySpreadConstraints[2].labelSelector tier Exists selects none of this workload's own pods (labels "
         "app=web): only other pods are counted, its own replicas are not spread (a typo?)")]
    # without the pod's labels (a caller that does not know them) nothing is guessed
    assert pod_spec_hints(spec, "spec") == []


def test_validate_reads_the_template_labels(tmp_path):
    from karpenter_lambda.cli.main import main

    spread = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    container = [{"name": "c", "image": "nginx"}]
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"topologySpreadConstraints": [
                                     {**spread, "labelSelector": {"matchLabels": {"app": "wev"}}}],
                                          "containers": container}}}}
    solo = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "default", "labels": {"app": "solo"}},
            "spec": {"topologySpreadConstraints": [{**spread, "labelSelector": {"matchLabels": {"app": "solo"}}}],
                     "containers": container}}
    text = yaml.safe_dump_all([web, solo], sort_keys=False)
    (tmp_path / "w.yaml").write_text(text)
    line = 1 + next(i for i, x in enumerate(text.splitlines()) if "labelSelector" in x)   # web's, the first
    import contextlib
    import io
    import json

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["validate", "--json", str(tmp_path / "w.yaml")]) == 0
    warnings = json.loads(out.getvalue())["warnings"]
    assert [(w["path"], w["line"]) for w in warnings] == [
        ("spec.template.spec.topologySpreadConstraints[0].labelSelector", line)], warnings


def test_instance_label_values_no_catalog_type_has():
    from karpenter_lambda.catalog.instancetypes import label_values_of_names

    catalog = label_values_of_names(["m5.large", "m5.2xlarge", "m7a.large", "m7g.large", "m7i.large", "m6i.large",
                                     "c7g.medium"])
    spec = {"nodeSelector": {"node.kubernetes.io/instance-type": "m5.larg", "karpenter.k8s.aws/instance-size": "2xl"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                       "values": ["m7", "c7g"]},
                                      {"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                                       "values": ["c", "m"]}]}]}}}}
    assert [(e.path, e.message) for e in pod_spec_hints(spec, "spec", catalog=catalog)] == [
        ("spec.nodeSelector[node.kubernetes.io/instance-type]",
         "no instance type in karpenter-lambda's catalog has node.kubernetes.io/instance-type=m5.larg (did you mean "
         "m5.large?)"),
        ("spec.nodeSelector[karpenter.k8s.aws/instance-size]",
         "no instance type in karpenter-lambda's catalog has karpenter.k8s.aws/instance-size=2xl (did you mean "
         "2xlarge?)"),
        ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
         ".matchExpressions[0].values",
         "no instance type in karpenter-lambda's catalog has karpenter.k8s.aws/instance-family=m7 (did you mean m7a "
         "or m7g or m7i?)"),
    ]
    # without the catalog (the Lambda's callers) nothing is known about these values
    assert pod_spec_hints(spec, "spec") == []


def test_the_bundled_catalog_knows_the_current_families():
    from karpenter_lambda.catalog.instancetypes import label_values_of_names
    from karpenter_lambda.catalog.pricing import bundled_instance_type_names

    values = label_values_of_names(bundled_instance_type_names())
    assert {"m5.large", "c7g.xlarge", "g6.12xlarge"} <= values["node.kubernetes.io/instance-type"]
    assert {"c", "m", "r", "g", "p", "t"} <= values["karpenter.k8s.aws/instance-category"]
    assert {"medium", "large", "metal"} <= values["karpenter.k8s.aws/instance-size"]


def test_dra_resource_claims_are_a_warning_that_they_are_not_read():
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}
    hints = pod_spec_hints(spec, "spec.template.spec")
    assert [h.path for h in hints] == ["spec.template.spec.resourceClaims"]
    assert "--ignore-dra-requests" in hints[0].message
    assert pod_spec_hints({"containers": [{"name": "c", "image": "x"}]}, "spec") == []
