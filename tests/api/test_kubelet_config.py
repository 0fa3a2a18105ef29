"""Karpenter v1.15's extended KubeletConfiguration (api/kubelet_config.py): any field of the kubelet's
KubeletConfiguration in ``spec.kubelet``, type-checked; AL2023 passes it to the kubelet, the other families refuse
what they would drop (UnsupportedKubeletConfiguration), Custom is exempt; CEL expressions are refused as not
supported; the drift hash counts every passthrough entry, ``false`` included."""

from __future__ import annotations

import pytest
import yaml

from karpenter_lambda.adapters.aws.userdata import ClusterInfo, render_user_data
from karpenter_lambda.api.hashes import ec2nodeclass_hash
from karpenter_lambda.api.kubelet_config import EXPRESSIONS_NOT_SUPPORTED, MAPPED, PASSTHROUGH, family_problems
from karpenter_lambda.api.schema import NOT_SUPPORTED
from karpenter_lambda.api.validation import KUBELET, validate_and_default

PASSTHROUGH_SET = {"containerLogMaxSize": "50Mi", "topologyManagerPolicy": "best-effort",
                   "serializeImagePulls": False, "featureGates": {"InPlacePodVerticalScaling": True},
                   "shutdownGracePeriod": "30s", "podPidsLimit": 4096, "memoryThrottlingFactor": 0.9,
                   "authentication": {"webhook": {"enabled": True, "cacheTTL": "2m"}},
                   "shutdownGracePeriodByPodPriority": [{"priority": 100, "shutdownGracePeriodSeconds": 20}],
                   "evictionMinimumReclaim": {"memory.available": "500Mi", "nodefs.available": "5%"}}


def nodeclass(kubelet: dict, alias: str | None = "al2023@latest", family: str | None = None) -> dict:
    spec = {"role": "r", "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            "amiSelectorTerms": [{"alias": alias}] if alias else [{"tags": {"ami": "mine"}}], "kubelet": kubelet}
    if family:
        spec["amiFamily"] = family
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "x"}, "spec": spec}


def errors_of(doc: dict) -> dict[str, str]:
    return {e.path: e.message for e in validate_and_default("EC2NodeClass", doc)[1]}


def test_the_table_is_the_kubelets_fields_minus_the_twelve_karpenter_maps():
    assert not set(MAPPED) & set(PASSTHROUGH)
    assert set(MAPPED) == set(KUBELET.fields)
    assert len(PASSTHROUGH) + len(MAPPED) == 125   # k8s.io/kubelet v0.36.3's KubeletConfiguration (TypeMeta aside)
    assert {"containerLogMaxSize", "imageMaximumGCAge", "tlsCurvePreferences", "memoryReservationPolicy"} <= set(PASSTHROUGH)


def test_al2023_accepts_any_kubelet_field_of_the_right_type():
    out, errors = validate_and_default("EC2NodeClass", nodeclass({"maxPods": 110, **PASSTHROUGH_SET}))
    assert errors == []
    assert out["spec"]["kubelet"]["serializeImagePulls"] is False      # kept as given, false included
    assert out["spec"]["kubelet"]["featureGates"] == {"InPlacePodVerticalScaling": True}


@pytest.mark.parametrize("field,value,path,message", [
    ("containerLogMaxSize", 50, "spec.kubelet.containerLogMaxSize", "must be a string"),
    ("serializeImagePulls", "no", "spec.kubelet.serializeImagePulls", "must be true or false"),
    ("podPidsLimit", "4096", "spec.kubelet.podPidsLimit", "must be an integer"),
    ("featureGates", {"X": "true"}, "spec.kubelet.featureGates[X]", "must be true or false"),
    ("authentication", {"webhook": {"enabled": "yes"}}, "spec.kubelet.authentication.webhook.enabled", "must be true or false"),
    ("authentication", {"webhok": {}}, "spec.kubelet.authentication.webhok", 'unknown field (did you mean "webhook"?)'),
    ("memoryThrottlingFactor", "0.9", "spec.kubelet.memoryThrottlingFactor", "must be a number"),
    ("evictionMinimumReclaim", {"memory.avail": "1Gi"}, "spec.kubelet.evictionMinimumReclaim[memory.avail]", "isn't a valid eviction signal"),
    ("evictionMinimumReclaim", {"memory.available": "lots"}, "spec.kubelet.evictionMinimumReclaim[memory.available]", "must be a percentage or a resource quantity"),
    ("maxPod", 3, "spec.kubelet.maxPod", 'unknown field (did you mean "maxPods"?)'),
    ("containerLogMaxSiz", "1Mi", "spec.kubelet.containerLogMaxSiz", 'unknown field (did you mean "containerLogMaxSize"?)'),
    ("noSuchKubeletField", 1, "spec.kubelet.noSuchKubeletField", "unknown field: not a field of the kubelet's KubeletConfiguration (kubelet.config.k8s.io/v1beta1 of k8s.io/kubelet v0.36.3)"),
])
def test_types_and_names_are_checked(field, value, path, message):
    errors = errors_of(nodeclass({field: value}))
    assert path in errors, errors
    assert message in errors[path]


def test_register_with_taints_is_refused_everywhere():
    errors = errors_of(nodeclass({"registerWithTaints": [{"key": "a", "effect": "NoSchedule"}]}))
    assert errors["spec.kubelet.registerWithTaints"].startswith(NOT_SUPPORTED + " (a node registers with its NodeClaim's taints")


@pytest.mark.parametrize("alias,family", [("al2@latest", None), ("bottlerocket@latest", None),
                                          ("windows2022@latest", None), (None, "AL2")])
def test_families_that_would_drop_a_field_refuse_it(alias, family):
    errors = errors_of(nodeclass({"maxPods": 20, "containerLogMaxSize": "50Mi"}, alias, family))
    name = family or {"al2": "AL2", "bottlerocket": "Bottlerocket", "windows2022": "Windows2022"}[alias.split("@")[0]]
    assert list(errors) == ["spec.kubelet.containerLogMaxSize"]
    assert errors["spec.kubelet.containerLogMaxSize"].startswith(f"not applied by the {name} AMI family")
    assert "silently dropped" in errors["spec.kubelet.containerLogMaxSize"]


def test_custom_is_exempt_and_al2023_takes_everything():
    assert errors_of(nodeclass({"containerLogMaxSize": "50Mi", "clusterDNS": ["10.0.0.10", "10.0.0.11"]}, None, "Custom")) == {}
    assert errors_of(nodeclass({"containerLogMaxSize": "50Mi", "clusterDNS": ["10.0.0.10", "10.0.0.11"]})) == {}
    # the alias family with amiFamily: Custom is Custom (its userData is the user's)
    assert errors_of(nodeclass({"containerLogMaxSize": "50Mi"}, "al2@latest", "Custom")) == {}


def test_bottlerocket_pods_per_core_and_several_cluster_dns_entries_are_refused():
    errors = errors_of(nodeclass({"podsPerCore": 4, "clusterDNS": ["10.0.0.10", "10.0.0.11"]}, "bottlerocket@latest"))
    assert errors["spec.kubelet.podsPerCore"].startswith("not applied by the Bottlerocket AMI family")
    assert errors["spec.kubelet.clusterDNS"] == ("the Bottlerocket AMI family takes one entry (a single-valued bootstrap "
                                                 "parameter), but 2 were set")
    assert errors_of(nodeclass({"podsPerCore": 4, "clusterDNS": ["10.0.0.10"]}, "al2@latest")) == {}


def test_family_problems_is_the_pure_rule():
    assert family_problems("AL2023", {"containerLogMaxSize": "1Mi"}) == []
    assert family_problems(None, {"containerLogMaxSize": "1Mi"}) == []
    assert [f for f, _ in family_problems("Windows2019", {"maxPods": 3, "seccompDefault": True})] == ["seccompDefault"]


@pytest.mark.parametrize("kubelet,path", [
    ({"maxPods": "((default_enis - 1) * (ips_per_eni - 1)) + 2"}, "spec.kubelet.maxPods"),
    ({"kubeReserved": {"cpu": "max(60, vcpus * 30)"}}, "spec.kubelet.kubeReserved[cpu]"),
    ({"systemReserved": {"memory": "memory_mib / 64"}}, "spec.kubelet.systemReserved[memory]"),
])
def test_cel_expressions_are_refused_as_not_supported(kubelet, path):
    assert errors_of(nodeclass(kubelet))[path] == EXPRESSIONS_NOT_SUPPORTED


def test_a_plain_bad_quantity_is_still_called_one():
    errors = errors_of(nodeclass({"kubeReserved": {"cpu": "1 core"}, "maxPods": "110"}))
    assert "must be an integer" in errors["spec.kubelet.maxPods"]
    assert EXPRESSIONS_NOT_SUPPORTED != errors["spec.kubelet.kubeReserved[cpu]"]


def test_al2023_nodeconfig_carries_them_as_given():
    cluster = ClusterInfo(name="c1", endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
    text = render_user_data("AL2023", cluster, None, {"karpenter.sh/nodepool": "default"}, [], [],
                            {"maxPods": 30, **PASSTHROUGH_SET}, 30, None)
    part = text.split("Content-Type: application/node.eks.aws", 1)[1].split("\n\n", 1)[1].split("\n--", 1)[0]
    cfg = yaml.safe_load(part)["spec"]["kubelet"]["config"]
    for k, v in PASSTHROUGH_SET.items():
        assert cfg[k] == v, k
    assert cfg["maxPods"] == 30 and cfg["registerWithTaints"][0]["key"] == "karpenter.sh/unregistered"


def test_the_drift_hash_counts_every_passthrough_entry_false_included():
    base = nodeclass({"maxPods": 110})
    with_false = nodeclass({"maxPods": 110, "serializeImagePulls": False})
    with_true = nodeclass({"maxPods": 110, "serializeImagePulls": True})
    hashes = {ec2nodeclass_hash(d) for d in (base, with_false, with_true)}
    assert len(hashes) == 3
    # the twelve keep v1.14's struct hashing: a zero value is the same as none (no drift of running nodes)
    assert ec2nodeclass_hash(nodeclass({"maxPods": 110, "podsPerCore": 0})) == ec2nodeclass_hash(base)
