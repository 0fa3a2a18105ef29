"""A capacity reservation's kind in the catalog: DescribeCapacityReservations' ``Interruptible`` reaches the reserved
offering, whose labels are the id, type and interruptible (upstream ``ReservedCapacityResolver``); NodeOverlays select
offerings by them (upstream: an overlay's requirements against the offerings' requirements); ``plan``'s allotment of
reservations honours a NodeClaim's type / interruptible requirements and upstream's order on a price tie."""

from __future__ import annotations

from types import SimpleNamespace

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodeOverlay
from karpenter_lambda.catalog import reservations as R
from karpenter_lambda.catalog.overlay import apply_overlays
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.scheduling.requirements import Requirements

NOW = 1_800_000_000.0


def _m5(reservations):
    offs = [Offering("us-east-1a", "on-demand", 0.096), Offering("us-east-1b", "on-demand", 0.096)]
    offs += R.reserved_offerings("m5.large", reservations, 0.096)
    return InstanceType("m5.large", {L.INSTANCE_TYPE: "m5.large"}, {"cpu": 2000, "pods": 29}, offerings=offs)


def _reservations():
    descs = [{"CapacityReservationId": "cr-1default", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
              "AvailableInstanceCount": 5, "TotalInstanceCount": 5, "InstanceMatchCriteria": "open",
              "ReservationType": "default", "Interruptible": True, "State": "active"},
             {"CapacityReservationId": "cr-2block", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1b",
              "AvailableInstanceCount": 5, "TotalInstanceCount": 5, "InstanceMatchCriteria": "targeted",
              "ReservationType": "capacity-block", "State": "active"}]
    rs, problems = R.parse_reservations(descs, NOW)
    assert problems == []
    return rs


def test_the_interruptible_flag_reaches_the_reserved_offering_and_its_labels():
    m5 = _m5(_reservations())
    got = {o.reservation_id: o.reservation_labels() for o in m5.offerings if o.reservation_id}
    assert got == {
        "cr-1default": {L.CAPACITY_RESERVATION_ID: "cr-1default", L.CAPACITY_RESERVATION_TYPE: "default",
                        L.CAPACITY_RESERVATION_INTERRUPTIBLE: "true"},
        "cr-2block": {L.CAPACITY_RESERVATION_ID: "cr-2block", L.CAPACITY_RESERVATION_TYPE: "capacity-block",
                      L.CAPACITY_RESERVATION_INTERRUPTIBLE: "false"}}
    assert Offering("us-east-1a", "on-demand", 0.096).reservation_labels() == {}
    # upstream's order of kinds on a price tie
    ranks = {o.reservation_id: o.reservation_rank() for o in m5.offerings if o.reservation_id}
    plain = Offering("us-east-1a", "reserved", 0.1, reservation_id="cr-3", reservation_type="default")
    assert plain.reservation_rank() < ranks["cr-2block"] < ranks["cr-1default"]


def _overlay(name, key, values, price):
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                        "spec": {"requirements": [{"key": key, "operator": "In", "values": values}], "price": price}})


def test_an_overlay_selects_reserved_offerings_by_type_and_interruptible():
    for key, values, changed in ((L.CAPACITY_RESERVATION_TYPE, ["capacity-block"], "cr-2block"),
                                 (L.CAPACITY_RESERVATION_INTERRUPTIBLE, ["true"], "cr-1default")):
        (m5,) = apply_overlays([_m5(_reservations())], [_overlay("o", key, values, "0.5")])
        prices = {o.reservation_id: o.price for o in m5.offerings if o.reservation_id}
        assert prices[changed] == 0.5, key
        assert [p for rid, p in prices.items() if rid != changed] == [0.096 / R.RESERVED_PRICE_DIVISOR], key
        # the overlaid offering keeps its reservation's kind
        assert {o.reservation_id: o.reservation_interruptible for o in m5.offerings if o.reservation_id} == \
            {"cr-1default": True, "cr-2block": False}


def _claim(name, it, requirements, zone="us-east-1a"):
    return SimpleNamespace(name=name, instance_types=[it], requirements=Requirements.from_list(requirements),
                           instance_type=it.name, zone=zone, capacity_type="reserved", price=0.0, reason="planned")


def test_the_plan_allots_the_reservation_the_requirements_admit():
    m5 = _m5(_reservations())
    reserved = {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}
    # planned in us-east-1a (the interruptible ODCR's zone), but asking for a non-interruptible reservation
    claims = [_claim("a", m5, [reserved, {"key": L.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "In", "values": ["false"]}]),
              _claim("b", m5, [reserved, {"key": L.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["default"]}],
                     zone="us-east-1b")]
    assert R.allot_reservations(claims) == {"a": "cr-2block", "b": "cr-1default"}
    assert [(c.zone, c.capacity_type) for c in claims] == [("us-east-1b", "reserved"), ("us-east-1a", "reserved")]
    # no reservation of the kind with room: the claim launches as the launch path falls back
    only_plain = _claim("c", m5, [reserved, {"key": L.CAPACITY_RESERVATION_ID, "operator": "In", "values": ["cr-9"]}])
    assert R.allot_reservations([only_plain]) == {} and only_plain.capacity_type == "on-demand"
    # nothing asked: equal prices, the planned zone first, else upstream's order (the block before the interruptible)
    free = [_claim("d", m5, [reserved], zone="us-east-1c")]
    assert R.allot_reservations(free) == {"d": "cr-2block"}


def test_a_whole_capacity_type_marked_unavailable_makes_its_offerings_unavailable():
    """The ``("any", "any", "spot")`` entry a launch writes when spot has no service-linked role (upstream
    ``MarkCapacityTypeUnavailable``) makes every spot offering of the catalog unavailable, so the scheduler plans
    on-demand for the cache's TTL instead of planning spot the launch then refuses."""
    from karpenter_lambda.catalog.instancetypes import build_instance_types
    from karpenter_lambda.catalog.pricing import PriceBook
    from karpenter_lambda.catalog.reservations import capacity_type_key

    raw = [{"InstanceType": "m5.large", "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 8192},
            "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}, "SupportedVirtualizationTypes": ["hvm"],
            "SupportedUsageClasses": ["on-demand", "spot"], "NetworkInfo": {"MaximumNetworkInterfaces": 3,
                                                                          "Ipv4AddressesPerInterface": 10}}]
    offerings = [{"InstanceType": "m5.large", "LocationType": "availability-zone", "Location": z}
                 for z in ("us-east-1a", "us-east-1b")]
    prices = PriceBook.from_bundled("us-east-1")

    def avail(unavailable):
        (t,) = build_instance_types(raw, offerings, prices, "us-east-1", unavailable=unavailable)
        return sorted((o.zone, o.capacity_type) for o in t.offerings if o.available)

    assert avail(frozenset()) == [("us-east-1a", "on-demand"), ("us-east-1a", "spot"),
                                  ("us-east-1b", "on-demand"), ("us-east-1b", "spot")]
    assert avail({capacity_type_key("spot")}) == [("us-east-1a", "on-demand"), ("us-east-1b", "on-demand")]
