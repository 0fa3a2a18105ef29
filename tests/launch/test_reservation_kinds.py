"""Reservation kinds on the launch path (moto + sim/ec2_extras), as upstream's ``pkg/providers/instance/filter``:
a NodeClaim's ``capacity-reservation-type`` / ``-interruptible`` requirements choose among the reserved offerings,
equal prices go to a non-interruptible ODCR, then a capacity block, then an interruptible ODCR, a capacity-block
launch carries one override (CreateFleet takes one block), and the NodeClaim gets the ``-interruptible`` label."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from karpenter_lambda.api import labels as wk
from karpenter_lambda.catalog.instancetypes import build_instance_types
from karpenter_lambda.catalog.pricing import PriceBook
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.cloudprovider import InstanceProvider
from karpenter_lambda.cloudprovider.launch import candidates_for, launch
from karpenter_lambda.scheduling.requirements import Requirements
from karpenter_lambda.sim import ec2_extras

from .conftest import REGION, nodeclass, resolver
from .test_reservations import _provider, _request, reservation_env

TYPES = ["m5.large", "m5.xlarge"]


@pytest.fixture
def kinds(env):
    k = reservation_env(env, TYPES)
    k.captured = []
    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                 lambda params, **kw: k.captured.append(copy.deepcopy(params)))
    return k


def _backend():
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    return ec2_backends[DEFAULT_ACCOUNT_ID][REGION]


def _reserve(ec2, itype="m5.large", zone="us-east-1a", count=3, *, block=False, interruptible=False) -> str:
    rid = ec2.create_capacity_reservation(InstanceType=itype, InstancePlatform="Linux/UNIX", AvailabilityZone=zone,
                                          InstanceCount=count)["CapacityReservation"]["CapacityReservationId"]
    # CreateCapacityReservation makes neither a capacity block nor an interruptible ODCR: the simulator's store says so
    store = ec2_extras.reservations_of(_backend())
    if block:
        store[rid]["ReservationType"] = "capacity-block"
    if interruptible:
        store[rid]["Interruptible"] = True
    return rid


def _setup(k, *rids):
    resolved = resolver(k.env).resolve(nodeclass(capacityReservationSelectorTerms=[{"id": r} for r in rids]))
    its = build_instance_types(k.raw, k.offerings, PriceBook.from_bundled(REGION), REGION,
                               zones=["us-east-1a", "us-east-1b"], reservations=resolved.capacity_reservations)
    return resolved, its


def _targets(ec2, params) -> list[str]:
    """The capacity reservations a CreateFleet request's launch templates target, one per override."""
    out = []
    for cfg in params["LaunchTemplateConfigs"]:
        name = cfg["LaunchTemplateSpecification"]["LaunchTemplateName"]
        lt = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"][0]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"][0]
        rid = data["LaunchTemplateData"]["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"]
        out.extend(rid for _ in cfg["Overrides"])
    return out



def test_the_reservation_type_and_interruptible_requirements_choose_the_reservation(kinds):
    ec2 = kinds.env.ec2
    odcr = _reserve(ec2, interruptible=True)        # an interruptible ODCR ...
    block = _reserve(ec2, block=True)               # ... and a capacity block, both m5.large in us-east-1a
    resolved, its = _setup(kinds, odcr, block)
    assert {r.id: r.interruptible for r in resolved.capacity_reservations} == {odcr: True, block: False}
    m5 = next(it for it in its if it.name == "m5.large")
    assert {o.reservation_id: o.reservation_interruptible for o in m5.offerings if o.reservation_id} == {odcr: True, block: False}

    want_block = [{"key": wk.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["capacity-block"]}]
    inst = launch(_provider(kinds), _request(its, resolved, want_block, name="default-k1"))
    assert inst.capacity_type == "reserved" and inst.labels == {
        wk.CAPACITY_RESERVATION_ID: block, wk.CAPACITY_RESERVATION_TYPE: "capacity-block",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false"}
    assert _targets(ec2, kinds.captured[-1]) == [block]

    not_interruptible = [{"key": wk.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "In", "values": ["false"]}]
    inst = launch(_provider(kinds), _request(its, resolved, not_interruptible, name="default-k2"))
    assert inst.labels[wk.CAPACITY_RESERVATION_ID] == block and _targets(ec2, kinds.captured[-1]) == [block]

    # the interruptible ODCR when asked for: the NodeClaim says it is interruptible
    want_odcr = [{"key": wk.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["default"]}]
    inst = launch(_provider(kinds), _request(its, resolved, want_odcr, name="default-k3"))
    assert inst.labels == {wk.CAPACITY_RESERVATION_ID: odcr, wk.CAPACITY_RESERVATION_TYPE: "default",
                           wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "true"}
    assert _targets(ec2, kinds.captured[-1]) == [odcr]


def test_a_price_tie_takes_an_odcr_then_a_capacity_block_then_an_interruptible_odcr(kinds):
    ec2 = kinds.env.ec2
    interruptible = _reserve(ec2, interruptible=True, count=5)   # the most room: not what decides the kind
    block = _reserve(ec2, block=True)
    resolved, its = _setup(kinds, interruptible, block)
    inst = launch(_provider(kinds), _request(its, resolved, name="default-t1"))
    assert inst.labels[wk.CAPACITY_RESERVATION_ID] == block and _targets(ec2, kinds.captured[-1]) == [block]
    plain = _reserve(ec2, zone="us-east-1b", count=1)
    resolved, its = _setup(kinds, interruptible, block, plain)
    inst = launch(_provider(kinds), _request(its, resolved, name="default-t2"))
    assert inst.labels[wk.CAPACITY_RESERVATION_ID] == plain and inst.zone == "us-east-1b"
    assert _targets(ec2, kinds.captured[-1]) == [plain]


def test_a_capacity_block_launch_sends_one_override(kinds):
    ec2 = kinds.env.ec2
    blocks = [_reserve(ec2, "m5.large", "us-east-1a", block=True), _reserve(ec2, "m5.large", "us-east-1b", block=True),
              _reserve(ec2, "m5.xlarge", "us-east-1a", block=True)]
    resolved, its = _setup(kinds, *blocks)
    inst = launch(_provider(kinds), _request(its, resolved, name="default-b1"))
    params = kinds.captured[-1]
    overrides = [o for cfg in params["LaunchTemplateConfigs"] for o in cfg["Overrides"]]
    assert len(overrides) == 1 and params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    # the cheapest block (m5.large; of its two zones the first reservation), and the NodeClaim says which
    assert (inst.instance_type, inst.zone) == ("m5.large", "us-east-1a")
    assert inst.labels[wk.CAPACITY_RESERVATION_ID] == _targets(ec2, params)[0] == min(blocks[:2])


def test_candidates_keep_one_kind_and_the_roomiest_reservation_per_zone():
    def off(rid, zone="us-east-1a", rtype="default", interruptible=False, room=1, price=0.00001):
        return Offering(zone, "reserved", price, reservation_id=rid, reservation_type=rtype, reservation_capacity=room,
                        reservation_interruptible=interruptible)

    it = InstanceType("m5.large", {}, {"pods": 29}, offerings=[
        off("cr-a", room=1), off("cr-b", room=4), off("cr-c", "us-east-1b", interruptible=True, room=9),
        off("cr-d", "us-east-1b", rtype="capacity-block", room=9), Offering("us-east-1a", "on-demand", 0.096)])
    plan = SimpleNamespace(instance_types=[it], requirements=Requirements.from_list([]))
    got = candidates_for(plan, None, set())
    assert [(c[1], c[3].reservation_id) for c in got["reserved"]] == [("us-east-1a", "cr-b")]
    assert got["on-demand"] == [("m5.large", "us-east-1a", 0.096)]
    # a cheaper kind wins whatever its rank; requirements that exclude a kind leave the next
    it.offerings[2] = off("cr-c", "us-east-1b", interruptible=True, room=9, price=0.000001)
    assert [c[3].reservation_id for c in candidates_for(plan, None, set())["reserved"]] == ["cr-c"]
    plan.requirements = Requirements.from_list([{"key": wk.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "NotIn",
                                                 "values": ["true"]},
                                                {"key": wk.CAPACITY_RESERVATION_ID, "operator": "NotIn", "values": ["cr-b"]}])
    assert [c[3].reservation_id for c in candidates_for(plan, None, set())["reserved"]] == ["cr-a"]
    # reservations marked unavailable in this launch: the next kind
    assert [c[3].reservation_id for c in candidates_for(plan, None, {("cr-a", "us-east-1a", "reserved")})["reserved"]] == ["cr-d"]


def test_an_adopted_instance_reads_its_reservation_kind():
    desc = {"InstanceId": "i-1", "InstanceType": "m5.large", "Placement": {"AvailabilityZone": "us-east-1a"},
            "CapacityReservationId": "cr-1", "InstanceLifecycle": "interruptible-capacity-reservation",
            "CapacityReservationSpecification": {"CapacityReservationPreference": "capacity-reservations-only"}}
    got = InstanceProvider.as_instance(desc)
    assert got.capacity_type == "reserved" and got.labels == {
        wk.CAPACITY_RESERVATION_ID: "cr-1", wk.CAPACITY_RESERVATION_TYPE: "default",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "true"}
    got = InstanceProvider.as_instance({**desc, "InstanceLifecycle": "capacity-block"})
    assert got.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    assert got.labels[wk.CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
