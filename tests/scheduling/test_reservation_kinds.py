"""A capacity reservation's kind in the scheduler: every reserved offering carries ``capacity-reservation-id``,
``-type`` and ``-interruptible`` (upstream ``ReservedCapacityResolver``), a NodePool or pod constraining them gets an
offering that has them, and of reserved offerings of equal price a non-interruptible ODCR comes first, then a capacity
block, then an interruptible ODCR (upstream ``CapacityReservationTypeFilter``).  The reservations sit in different
zones, so the NodeClaim's zone says which one was chosen."""

from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog.types import Offering
from karpenter_lambda.scheduling import NodePoolInput
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate
from karpenter_lambda.scheduling.requirements import Requirements

from .helpers import catalog, nodepool, pod, run

RESERVED_TOO = {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}


def _types(plain_odcr=False):
    """The test catalog with m5.large reserved in an interruptible ODCR (us-east-1a) and a capacity block
    (us-east-1b), and with ``plain_odcr`` a non-interruptible ODCR (us-east-1c)."""
    types = catalog()
    m5 = next(t for t in types if t.name == "m5.large")
    m5.offerings.append(Offering("us-east-1a", "reserved", 0.0000096, reservation_id="cr-1default",
                                 reservation_type="default", reservation_capacity=5, reservation_interruptible=True))
    m5.offerings.append(Offering("us-east-1b", "reserved", 0.0000096, reservation_id="cr-2block",
                                 reservation_type="capacity-block", reservation_capacity=5))
    if plain_odcr:
        m5.offerings.append(Offering("us-east-1c", "reserved", 0.0000096, reservation_id="cr-3plain",
                                     reservation_type="default", reservation_capacity=1))
    return types


def _claim(requirements, types=None):
    res = run([pod("a", cpu="1", memory="1Gi")], pools=[nodepool(requirements=requirements)], types=types or _types())
    assert not res.unschedulable, res.unschedulable
    (nc,) = res.nodeclaims
    return nc


def test_a_nodepool_requiring_a_reservation_type_or_interruptible_gets_that_reservation():
    for req in ({"key": L.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["capacity-block"]},
                {"key": L.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "In", "values": ["false"]},
                {"key": L.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "NotIn", "values": ["true"]},
                {"key": L.CAPACITY_RESERVATION_ID, "operator": "In", "values": ["cr-2block"]}):
        nc = _claim([RESERVED_TOO, req])
        assert (nc.instance_type, nc.capacity_type, nc.zone) == ("m5.large", "reserved", "us-east-1b"), req
    nc = _claim([RESERVED_TOO, {"key": L.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "In", "values": ["true"]}])
    assert (nc.capacity_type, nc.zone) == ("reserved", "us-east-1a")
    # a pod selecting the kind: the same
    res = run([pod("p", cpu="1", memory="1Gi", nodeSelector={L.CAPACITY_RESERVATION_TYPE: "capacity-block"})],
              pools=[nodepool(requirements=[RESERVED_TOO])], types=_types())
    assert [(n.capacity_type, n.zone) for n in res.nodeclaims] == [("reserved", "us-east-1b")]
    # no reservation of the kind asked for: nothing reserved (an interruptible capacity block does not exist)
    res = run([pod("x", cpu="1", memory="1Gi")], types=_types(), pools=[nodepool(requirements=[
        RESERVED_TOO, {"key": L.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["capacity-block"]},
        {"key": L.CAPACITY_RESERVATION_INTERRUPTIBLE, "operator": "In", "values": ["true"]}])])
    assert not res.nodeclaims and res.unschedulable


def test_equal_prices_take_an_odcr_then_a_capacity_block_then_an_interruptible_odcr():
    nc = _claim([RESERVED_TOO])
    assert (nc.capacity_type, nc.zone) == ("reserved", "us-east-1b")
    nc = _claim([RESERVED_TOO], types=_types(plain_odcr=True))
    assert (nc.capacity_type, nc.zone) == ("reserved", "us-east-1c")


def test_the_instance_type_offers_every_reservation_label():
    template = NodeClaimTemplate.for_nodepool(NodePoolInput(nodepool(requirements=[RESERVED_TOO]), _types()))
    m5 = next(t for t in template.types if t.name == "m5.large")
    assert m5.reqs.get(L.CAPACITY_RESERVATION_TYPE).values == {"default", "capacity-block"}
    assert m5.reqs.get(L.CAPACITY_RESERVATION_INTERRUPTIBLE).values == {"true", "false"}
    # a replacement node sized outside the solver (consolidation) for a NodePool wanting a capacity block
    want = Requirements.from_list([{"key": L.CAPACITY_RESERVATION_TYPE, "operator": "In", "values": ["capacity-block"]},
                                   {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["reserved"]}])
    offers = template.offers_holding({"cpu": 1000}, want)
    assert offers and {o.offering.reservation_id for o in offers} == {"cr-2block"}
    assert offers[0].labels[L.CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert offers[0].labels[L.CAPACITY_RESERVATION_TYPE] == "capacity-block"
