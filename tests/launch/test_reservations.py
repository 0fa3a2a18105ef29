"""Issue 30 item 4 on the launch path (moto + sim/ec2_extras): capacity reservations resolved from an EC2NodeClass's
selector terms, reserved offerings in the catalog, a reserved launch targeting its reservation with the NodeClaim's
reservation labels, and the fall back to on-demand once the reservation is full."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws import capacity_reservations
from karpenter_lambda.adapters.aws.unavailable import UnavailableOfferings
from karpenter_lambda.adapters.aws.userdata import ClusterInfo
from karpenter_lambda.api import labels as wk
from karpenter_lambda.catalog.instancetypes import build_instance_types
from karpenter_lambda.catalog.pricing import PriceBook
from karpenter_lambda.cloudprovider import InstanceProvider
from karpenter_lambda.cloudprovider.launch import launch
from karpenter_lambda.cloudprovider.types import CreateRequest
from karpenter_lambda.scheduling.requirements import Requirements
from karpenter_lambda.sim import ec2_extras

from .conftest import CLUSTER, REGION, nodeclass, resolver

TYPES = ["m5.large", "m5.xlarge", "c5.xlarge"]


def reservation_env(env, types: list[str]) -> SimpleNamespace:
    """moto with the simulator's capacity-reservation support, ``types`` described and offered in zones a and b, and
    an unavailable-offerings cache."""
    assert ec2_extras.install()
    raw = env.ec2.describe_instance_types(InstanceTypes=types)["InstanceTypes"]
    offerings = [{"InstanceType": t, "Location": z, "LocationType": "availability-zone"}
                 for t in types for z in ("us-east-1a", "us-east-1b")]
    cache = UnavailableOfferings(ttl_seconds=180, clock=lambda: 1_000_000.0, cluster_name=CLUSTER, client=env.ddb)
    cache.ensure_table()
    return SimpleNamespace(env=env, raw=raw, offerings=offerings, cache=cache)


@pytest.fixture
def cr_env(env):
    return reservation_env(env, TYPES)


def _reserve(ec2, itype="m5.xlarge", zone="us-east-1a", count=4, tags=None, **kw) -> str:
    spec = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()]}]
    return ec2.create_capacity_reservation(InstanceType=itype, InstancePlatform="Linux/UNIX", AvailabilityZone=zone,
                                           InstanceCount=count, TagSpecifications=spec, **kw)["CapacityReservation"]["CapacityReservationId"]


def test_selector_terms_resolve_by_id_tags_and_owner(cr_env):
    ec2 = cr_env.env.ec2
    a = _reserve(ec2, tags={"team": "a"})
    b = _reserve(ec2, itype="c5.xlarge", zone="us-east-1b", count=2, tags={"team": "b"}, InstanceMatchCriteria="targeted")
    _reserve(ec2, tags={"team": "c"})
    owner = ec2.describe_capacity_reservations(CapacityReservationIds=[a])["CapacityReservations"][0]["OwnerId"]
    got, problems = capacity_reservations.resolve(ec2, [{"id": a}, {"tags": {"team": "b"}, "ownerID": owner}], 0.0)
    assert [r.id for r in got] == sorted([a, b]) and problems == []
    by_id = {r.id: r for r in got}
    assert (by_id[b].instance_type, by_id[b].zone, by_id[b].available, by_id[b].instance_match_criteria) == \
        ("c5.xlarge", "us-east-1b", 2, "targeted")
    assert capacity_reservations.resolve(ec2, [{"tags": {"team": "b"}, "ownerID": "000000000000"}], 0.0)[0] == []
    assert capacity_reservations.resolve(ec2, [{"id": "cr-0123456789abcdef0"}], 0.0)[0] == []  # unknown id: none
    assert capacity_reservations.resolve(ec2, [{"tags": {"team": "*"}}], 0.0)[0].__len__() == 3
    ec2.cancel_capacity_reservation(CapacityReservationId=a)
    assert capacity_reservations.resolve(ec2, [{"id": a}], 0.0)[0] == []  # only active ones
    # the EC2NodeClass status then lists none (an empty list, so drift sees the reservation gone)
    r = resolver(cr_env.env).resolve(nodeclass(capacityReservationSelectorTerms=[{"id": a}]))
    assert r.status_patch()["capacityReservations"] == []
    assert "capacityReservations" not in resolver(cr_env.env).resolve(nodeclass()).status_patch()


def test_resolver_status_lists_the_reservations(cr_env):
    ec2 = cr_env.env.ec2
    rid = _reserve(ec2, tags={"team": "a"})
    r = resolver(cr_env.env).resolve(nodeclass(capacityReservationSelectorTerms=[{"tags": {"team": "a"}}]))
    st = r.status_patch()
    assert [c["id"] for c in st["capacityReservations"]] == [rid]
    assert st["capacityReservations"][0] | {} == {"id": rid, "instanceType": "m5.xlarge", "availabilityZone": "us-east-1a",
                                                 "ownerID": st["capacityReservations"][0]["ownerID"], "state": "active",
                                                 "instanceMatchCriteria": "open", "reservationType": "default",
                                                 "interruptible": False}
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds["CapacityReservationsReady"] == "True" and conds["Ready"] == "True"


def _catalog(cr_env, resolved, unavailable=frozenset()):
    return build_instance_types(cr_env.raw, cr_env.offerings, PriceBook.from_bundled(REGION), REGION,
                                zones=["us-east-1a", "us-east-1b"], unavailable=unavailable,
                                reservations=resolved.capacity_reservations,
                                placement_group_id=resolved.placement_group.id if resolved.placement_group else None)


def _request(its, resolved, extra=(), name="default-r1", capacity_types=("reserved", "on-demand")):
    """A CreateRequest for a plan of ``its`` asking ``capacity_types`` (and the requirements in ``extra``)."""
    plan = SimpleNamespace(instance_types=its, requirements=Requirements.from_list(
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)}, *extra]))
    np = SimpleNamespace(name="default", taints=[], startup_taints=[])
    nc = SimpleNamespace(name="default", spec={}, tags={})
    return CreateRequest(name=name, plan=plan, nodepool=np, nodeclass=nc, resolved=resolved,
                         labels={wk.NODEPOOL: "default"}, client_token=name)


def _provider(cr_env):
    cluster = SimpleNamespace(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", service_cidr="10.100.0.0/16")
    return SimpleNamespace(ec2=cr_env.env.ec2, cluster=cluster, unavailable=cr_env.cache, beside_karpenter=False)


def test_reserved_launch_targets_the_reservation_then_falls_back_when_full(cr_env):
    ec2 = cr_env.env.ec2
    rid = _reserve(ec2, count=1, tags={"team": "a"})
    resolved = resolver(cr_env.env).resolve(nodeclass(capacityReservationSelectorTerms=[{"id": rid}]))
    its = _catalog(cr_env, resolved)
    m5x = next(it for it in its if it.name == "m5.xlarge")
    reserved = [o for o in m5x.offerings if o.capacity_type == "reserved"]
    od = m5x.cheapest_offering(capacity_types={"on-demand"})
    assert len(reserved) == 1 and reserved[0].reservation_id == rid and reserved[0].available
    assert reserved[0].price == pytest.approx(od.price / 10_000_000) and reserved[0].reservation_capacity == 1

    first = launch(_provider(cr_env), _request(its, resolved))
    assert (first.instance_type, first.zone, first.capacity_type) == ("m5.xlarge", "us-east-1a", "reserved")
    assert first.labels == {wk.CAPACITY_RESERVATION_ID: rid, wk.CAPACITY_RESERVATION_TYPE: "default",
                            wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false"}
    desc = ec2.describe_instances(InstanceIds=[first.instance_id])["Reservations"][0]["Instances"][0]
    assert desc["CapacityReservationId"] == rid
    adopted = InstanceProvider.as_instance(desc)
    assert adopted.capacity_type == "reserved" and adopted.labels == first.labels
    lts = ec2.describe_launch_templates(Filters=[{"Name": f"tag:{wk.OWNER_TAG}", "Values": [CLUSTER]}])["LaunchTemplates"]
    specs = {}
    for lt in lts:
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        specs[lt["LaunchTemplateName"]] = data.get("CapacityReservationSpecification")
    assert {"CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": rid}} in specs.values(), specs

    # full now (AvailableInstanceCount 0, the catalog not refreshed yet): EC2 refuses, the reservation is marked
    # unavailable as (reservation, zone, reserved) and the same launch falls back to on-demand
    retries = []
    second = launch(_provider(cr_env), _request(its, resolved, name="default-r2"), on_retry=lambda why, offs: retries.append(offs))
    assert second.capacity_type == "on-demand" and second.labels == {}
    assert [rid, "us-east-1a", "reserved"] in retries[0]
    assert (rid, "us-east-1a", "reserved") in cr_env.cache.all()
    again = _catalog(cr_env, resolved, unavailable=cr_env.cache.all())
    assert not any(o.available for it in again for o in it.offerings if o.capacity_type == "reserved")
    # its instance terminated: the reservation has room again
    ec2.terminate_instances(InstanceIds=[first.instance_id])
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]["AvailableInstanceCount"] == 1


def test_on_demand_templates_opt_out_of_open_reservations(cr_env):
    resolved = resolver(cr_env.env).resolve(nodeclass())
    its = [it for it in _catalog(cr_env, resolved) if it.name == "m5.large"]
    inst = launch(_provider(cr_env), _request(its, resolved, capacity_types=("on-demand",)))
    assert inst.capacity_type == "on-demand"
    lts = cr_env.env.ec2.describe_launch_templates()["LaunchTemplates"]
    data = cr_env.env.ec2.describe_launch_template_versions(LaunchTemplateId=lts[0]["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}


def test_capacity_block_launch_uses_the_capacity_block_market(cr_env):
    ec2 = cr_env.env.ec2
    # CreateCapacityReservation makes no capacity block: the simulator's store holds the reservation type
    rid = _reserve(ec2, count=2)
    store = ec2_extras.reservations_of(_backend())
    store[rid]["ReservationType"] = "capacity-block"
    resolved = resolver(cr_env.env).resolve(nodeclass(capacityReservationSelectorTerms=[{"id": rid}]))
    assert resolved.capacity_reservations[0].reservation_type == "capacity-block"
    captured = []
    ec2.meta.events.register("provide-client-params.ec2.CreateFleet", lambda params, **kw: captured.append(dict(params)))
    inst = launch(_provider(cr_env), _request(_catalog(cr_env, resolved), resolved))
    assert inst.capacity_type == "reserved" and inst.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    assert captured[-1]["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in captured[-1]


def _backend():
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    return ec2_backends[DEFAULT_ACCOUNT_ID][REGION]


def test_placement_group_prefix_count_and_launch_fields_reach_the_template(cr_env):
    ec2 = cr_env.env.ec2
    pg = ec2.create_placement_group(GroupName="hpc", Strategy="partition", PartitionCount=3)["PlacementGroup"]
    resolved = resolver(cr_env.env).resolve(nodeclass(
        placementGroupSelector={"name": "hpc"}, ipPrefixCount=2, associatePublicIPAddress=True,
        detailedMonitoring=True, instanceStorePolicy="RAID0",
        metadataOptions={"httpTokens": "required", "httpPutResponseHopLimit": 3, "httpEndpoint": "enabled",
                         "httpProtocolIPv6": "disabled"}))
    assert resolved.placement_group.id == pg["GroupId"] and resolved.status_patch()["placementGroups"][0]["strategy"] == "partition"
    its = [it for it in _catalog(cr_env, resolved) if it.name == "m5.large"]
    assert its[0].labels[wk.PLACEMENT_GROUP_ID] == pg["GroupId"]
    req = _request(its, resolved, capacity_types=("on-demand",))
    req.plan.requirements = Requirements.from_list([{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                                                    {"key": wk.PLACEMENT_GROUP_PARTITION, "operator": "In", "values": ["3", "2"]}])
    inst = launch(_provider(cr_env), req)
    assert inst.labels == {wk.PLACEMENT_GROUP_ID: pg["GroupId"], wk.PLACEMENT_GROUP_PARTITION: "2"}
    lt = ec2.describe_launch_templates()["LaunchTemplates"][0]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["Placement"] == {"GroupId": pg["GroupId"], "PartitionNumber": 2}
    eni = data["NetworkInterfaces"][0]
    assert eni["Ipv4PrefixCount"] == 2 and eni["AssociatePublicIpAddress"] is True and eni["DeviceIndex"] == 0
    assert data["Monitoring"] == {"Enabled": True}
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 3 and data["MetadataOptions"]["HttpTokens"] == "required"
    assert "localStorage:\n      strategy: RAID0" in base64.b64decode(data["UserData"]).decode()
    desc = ec2.describe_instances(InstanceIds=[inst.instance_id])["Reservations"][0]["Instances"][0]
    assert desc["Placement"].get("GroupId") == pg["GroupId"]


def test_missing_placement_group_makes_the_nodeclass_not_ready(cr_env):
    r = resolver(cr_env.env).resolve(nodeclass(placementGroupSelector={"name": "nope"}))
    conds = {c.type: c for c in r.conditions}
    assert not conds["PlacementGroupReady"].status and conds["PlacementGroupReady"].reason == "PlacementGroupNotFound"
    assert not r.ready and "nope" in conds["Ready"].message


def test_cluster_info_ipv6_counts_ipv6_prefixes(cr_env):
    from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates, options_for

    resolved = resolver(cr_env.env).resolve(nodeclass(ipPrefixCount=1))
    info = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="fd00::/108")
    opts = options_for(resolved, info, resolved.amis[0], {}, [], [], 29, "on-demand")
    eni = LaunchTemplates(None, CLUSTER).request(opts)["LaunchTemplateData"]["NetworkInterfaces"][0]
    assert eni.get("Ipv6PrefixCount") == 1 and "Ipv4PrefixCount" not in eni
