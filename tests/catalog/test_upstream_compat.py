"""The catalog against Karpenter's instance-type rules (aws/karpenter-provider-aws v1.14.1, same at head), on moto's
real DescribeInstanceTypes data:

* EFA: Karpenter advertises ``vpc.amazonaws.com/efa`` and attaches the EFA interfaces at launch; karpenter-lambda
  attaches none, so it does not advertise them and an EFA pod is reported unschedulable, the resource named;
* ``compatibility.go`` ``amiFamilyCheck``: no ``a1.*`` under AL2023;
* ``compatibility.go`` ``placementGroupCheck``: with a placement group, only types whose
  ``PlacementGroupInfo.SupportedStrategies`` hold its strategy;
* ``types.go`` ``ENILimitedPods``: ENIs and IPv4 per ENI from the type's NetworkInfo (default network card), the
  bundled VPC limits table only when the description lacks them.
"""

from __future__ import annotations

from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.aws import ec2_catalog
from karpenter_lambda.adapters.aws.placement_groups import PlacementGroup
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import EC2NodeClass, NodePool
from karpenter_lambda.catalog import PriceBook, build_instance_types
from karpenter_lambda.catalog.allocatable import NodeSettings, compute_capacity, compute_overhead, eni_limited_pods, max_pods
from karpenter_lambda.catalog import instancetypes
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.scheduling import NodePoolInput, SchedulingInput, solve

REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
MiB = 2**20


def _nodeclass(alias: str = "al2023@latest") -> EC2NodeClass:
    return EC2NodeClass({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                         "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": alias}]}})


def _nodepool(requirements=None) -> NodePool:
    reqs = [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}] + list(requirements or [])
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                     "spec": {"template": {"spec": {"requirements": reqs, "nodeClassRef": {
                         "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def _pod(name: str, requests: dict, node_selector: dict | None = None) -> dict:
    spec = {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": requests}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec}


def _solve(pods, types, requirements=None):
    return solve(SchedulingInput(pods=pods, nodepools=[NodePoolInput(_nodepool(requirements), types)]))


def _build(moto_ec2_data, **kw):
    raw, offerings = moto_ec2_data
    return build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION, zones=ZONES, **kw)


# --- EFA ---------------------------------------------------------------------------------------------------------


def test_efa_is_advertised_as_karpenter_does_and_an_efa_pod_gets_a_type_with_enough(default_catalog, moto_ec2_data):
    """Karpenter's ``efas``: capacity vpc.amazonaws.com/efa = EfaInfo.MaximumEfaInterfaces (p5.48xlarge 32, p4d 4);
    a pod asking for 2 goes to a type with at least 2, one asking for more than any type has is reported."""
    assert default_catalog["p5.48xlarge"].capacity[L.RESOURCE_EFA] == 32
    assert default_catalog["p4d.24xlarge"].allocatable[L.RESOURCE_EFA] == 4
    assert L.RESOURCE_EFA not in default_catalog["m5.large"].capacity        # no EfaInfo: not listed (zero)
    types = _build(moto_ec2_data)
    res = _solve([_pod("efa", {"cpu": "1", "memory": "1Gi", L.RESOURCE_EFA: "2"})], types)
    (plan,) = res.nodeclaims
    assert all(it.capacity.get(L.RESOURCE_EFA, 0) >= 2 for it in plan.instance_types)
    assert plan.requests[L.RESOURCE_EFA] == 2
    res = _solve([_pod("many", {"cpu": "1", "memory": "1Gi", L.RESOURCE_EFA: "64"})], types)
    assert res.nodeclaims == [] and "vpc.amazonaws.com/efa=64 (at most 32)" in res.unschedulable[0].reason


# --- amiFamilyCheck -----------------------------------------------------------------------------------------------


def test_a1_types_are_not_offered_under_al2023(moto_ec2_data):
    skipped: dict[str, str] = {}
    types = _build(moto_ec2_data, nodeclass=_nodeclass("al2023@latest"), skipped=skipped)
    assert not [it.name for it in types if it.name.startswith("a1.")]
    a1 = sorted(n for n in skipped if n.startswith("a1."))
    assert a1 == ["a1.2xlarge", "a1.4xlarge", "a1.large", "a1.medium", "a1.metal", "a1.xlarge"]
    assert all("AL2023" in skipped[n] for n in a1)
    # the default node class is AL2023 too
    assert not [it.name for it in _build(moto_ec2_data) if it.name.startswith("a1.")]
    # a 12-CPU arm64 pod got a1.4xlarge (the cheapest 16-vCPU arm64 type) before
    res = _solve([_pod("arm", {"cpu": "12", "memory": "4Gi"}, {L.ARCH: L.ARCH_ARM64})], types)
    assert len(res.nodeclaims) == 1 and not res.unschedulable
    assert not [it.name for it in res.nodeclaims[0].instance_types if it.name.startswith("a1.")]
    assert not res.nodeclaims[0].instance_type.startswith("a1.")


@pytest.mark.parametrize("alias", ["al2@latest", "bottlerocket@latest"])
def test_a1_types_stay_under_other_families(moto_ec2_data, alias):
    names = {it.name for it in _build(moto_ec2_data, nodeclass=_nodeclass(alias))}
    assert {"a1.large", "a1.4xlarge"} <= names


# --- placementGroupCheck ------------------------------------------------------------------------------------------


def test_cluster_placement_group_drops_types_without_the_cluster_strategy(moto_ec2_data, raw_by_name):
    skipped: dict[str, str] = {}
    types = _build(moto_ec2_data, placement_group_id="pg-0123", placement_group_strategy="cluster", skipped=skipped)
    names = {it.name for it in types}
    assert not [n for n in names if n.startswith(("t3a.", "t3.")) or "-flex." in n]
    assert all("cluster" in raw_by_name[n]["PlacementGroupInfo"]["SupportedStrategies"] for n in names)
    assert "placement group strategy 'cluster'" in skipped["t3a.xlarge"]
    assert "placement group strategy 'cluster'" in skipped["m7i-flex.large"]
    assert all(it.labels[L.PLACEMENT_GROUP_ID] == "pg-0123" for it in types)
    # the audit's pod: 2 CPU / 6Gi got t3a.xlarge (no cluster support) in the cluster group before
    res = _solve([_pod("x", {"cpu": "2", "memory": "6Gi"})], types, [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}])
    assert len(res.nodeclaims) == 1
    chosen = res.nodeclaims[0].instance_type
    assert "cluster" in raw_by_name[chosen]["PlacementGroupInfo"]["SupportedStrategies"], chosen


def test_partition_and_spread_groups_keep_t3a_and_no_strategy_keeps_everything(moto_ec2_data):
    for strategy in ("partition", "spread"):
        names = {it.name for it in _build(moto_ec2_data, placement_group_id="pg-1", placement_group_strategy=strategy)}
        assert {"t3a.xlarge", "m7i-flex.large", "m5.large"} <= names
    assert "t3a.xlarge" in {it.name for it in _build(moto_ec2_data, placement_group_id="pg-1")}


def test_incompatibility_rules(raw_by_name):
    assert instancetypes.incompatibility(raw_by_name["a1.large"], "AL2023") is not None
    assert instancetypes.incompatibility(raw_by_name["a1.large"], "AL2") is None
    assert instancetypes.incompatibility(raw_by_name["t3a.large"], "AL2023", "cluster") is not None
    assert instancetypes.incompatibility(raw_by_name["t3a.large"], "AL2023", "spread") is None
    assert instancetypes.incompatibility({"InstanceType": "zz9.large"}, "AL2023", "cluster") is not None  # no PlacementGroupInfo


def test_launch_catalog_passes_the_resolved_group_strategy(monkeypatch, moto_ec2_data):
    """AWSCloudProvider.instance_types hands the resolved group's strategy to the catalog (cache key included)."""
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    monkeypatch.setenv(ec2_catalog.SOURCE_ENV, "moto-bundled")
    monkeypatch.setenv(ec2_catalog.ESTIMATED_PRICES_ENV, "available")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        cloud = AWSCloudProvider(ec2, None, None, SimpleNamespace(name="c1"), region=REGION)

        def names(strategy):
            pg = PlacementGroup(id="pg-0abc", name="grp", strategy=strategy)
            resolved = SimpleNamespace(subnets=[{"zone": "us-east-1a"}], placement_group=pg, capacity_reservations=())
            return {it.name for it in cloud.instance_types(None, resolved, set())}

        cluster, spread = names("cluster"), names("spread")
    assert "m5.large" in cluster and "t3a.large" not in cluster and "c7i-flex.large" not in cluster
    assert {"t3a.large", "c7i-flex.large"} <= spread


# --- ENILimitedPods -----------------------------------------------------------------------------------------------


def test_eni_limited_pods_read_the_default_network_card_of_network_info(default_catalog, raw):
    """i7ie.48xlarge: 2 network cards (8 + 7 ENIs), default card 0, 50 IPv4 per ENI.  Karpenter (and the VPC CNI) use
    the default card: 8 x 49 + 2 = 394 pods and 11 x 394 + 255 = 4589 MiB kube-reserved; the bundled table's 15 ENIs
    gave 737 pods and 8362 MiB."""
    info = raw("i7ie.48xlarge")
    ni = info["NetworkInfo"]
    assert ni["DefaultNetworkCardIndex"] == 0 and [c["MaximumNetworkInterfaces"] for c in ni["NetworkCards"]] == [8, 7]
    assert eni_limited_pods(info) == 8 * (50 - 1) + 2 == 394
    it = default_catalog["i7ie.48xlarge"]
    assert it.capacity["pods"] == 394
    assert it.overhead["memory"] == (11 * 394 + 255 + 100) * MiB  # kube-reserved 4589 MiB + 100 MiB eviction
    i8ge = default_catalog["i8ge.48xlarge"]
    assert i8ge.capacity["pods"] == 590
    assert i8ge.overhead["memory"] == (11 * 590 + 255 + 100) * MiB
    # maxPods set: AL2023 still reserves memory for the ENI-limited count
    settings = NodeSettings(max_pods=110)
    cap = compute_capacity(info, settings)
    assert cap["pods"] == 110 and compute_overhead(info, cap, settings)["memory"] == (11 * 394 + 255 + 100) * MiB


def test_default_network_card_index_picks_the_card(raw):
    info = raw("i7ie.48xlarge")
    info["NetworkInfo"]["DefaultNetworkCardIndex"] = 1
    assert eni_limited_pods(info) == 7 * (50 - 1) + 2


def test_network_info_wins_over_the_table_and_the_table_is_the_fallback(raw):
    info = raw("m5.large")  # 3 ENIs x 10 IPv4 in both
    info["NetworkInfo"]["NetworkCards"][0]["MaximumNetworkInterfaces"] = 2
    assert eni_limited_pods(info) == 2 * (10 - 1) + 2
    del info["NetworkInfo"]  # no NetworkInfo: the bundled table's default card
    assert eni_limited_pods(info) == 3 * (10 - 1) + 2 == 29
    info = raw("m5.large")
    del info["NetworkInfo"]["Ipv4AddressesPerInterface"]
    assert max_pods(info, NodeSettings()) == 29
