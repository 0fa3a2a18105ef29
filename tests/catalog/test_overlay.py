"""NodeOverlay application (catalog/overlay.py): Karpenter's price, capacity, weight and conflict rules on the builders'
fixed catalog, plus the scheduler choosing by the overlaid price."""

from __future__ import annotations

import builders as B
import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodeOverlay
from karpenter_lambda.api.overlay import adjusted_price
from karpenter_lambda.catalog.overlay import (OverlaidInstanceType, OverlaidOffering, apply_overlays,
                                              apply_overlays_by_nodepool, offering_overlay, order_overlays)
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.inputs import scheduling_input

OD, SPOT = L.CAPACITY_TYPE_ON_DEMAND, L.CAPACITY_TYPE_SPOT


def overlay(name: str, *reqs: tuple, weight: int | None = None, **spec) -> NodeOverlay:
    s = {"requirements": [{"key": k, "operator": op, **({"values": list(v)} if v else {})} for k, op, *rest in reqs
                          for v in [rest[0] if rest else None]], **spec}
    if weight is not None:
        s["weight"] = weight
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": s})


def offer(it, zone=B.ZONES[0], ct=OD):
    return next(o for o in it.offerings if o.zone == zone and o.capacity_type == ct)


def by_name(its):
    return {it.name: it for it in its}


@pytest.mark.parametrize("price,change,expected", [
    (0.10, "0.25", 0.25), (0.10, "+0.05", 0.15), (0.10, "-0.04", 0.06), (0.10, "-0.5", 0.0),
    (0.10, "+10%", 0.11), (0.10, "-15%", 0.085), (0.10, "-100%", 0.0), (0.10, None, 0.10), (0.10, "", 0.10),
])
def test_adjusted_price_follows_karpenter(price, change, expected):
    assert adjusted_price(price, change) == pytest.approx(expected)


def test_price_adjustment_changes_only_the_selected_types_and_offerings():
    its = B.instance_types()
    ov = overlay("savings-plan", (L.INSTANCE_FAMILY, "In", ["m5"]), (L.CAPACITY_TYPE, "In", [OD]), priceAdjustment="-30%")
    out = by_name(apply_overlays(its, [ov]))
    m5 = out["m5.large"]
    o = offer(m5)
    assert isinstance(o, OverlaidOffering) and offering_overlay(o) == "savings-plan"
    assert o.price == pytest.approx(B.price("m5.large") * 0.7) and o.base_price == B.price("m5.large")
    assert o.price_change == "-30%"
    assert offering_overlay(offer(m5, ct=SPOT)) is None                     # spot left alone
    assert offer(m5, ct=SPOT).price == offer(B.instance_type("m5.large"), ct=SPOT).price
    assert out["c5.large"] is B.instance_type("c5.large")                   # untouched types are the same objects
    # nothing given was mutated
    assert offer(B.instance_type("m5.large")).price == B.price("m5.large")
    assert not isinstance(offer(B.instance_type("m5.large")), OverlaidOffering)


def test_absolute_price_replaces_an_estimate_and_clears_the_estimated_mark():
    its = B.instance_types("m5.large")
    spot = offer(its[0], ct=SPOT)
    assert spot.price_estimated    # the builders' spot prices are estimates
    out = apply_overlays(its, [overlay("fixed", (L.INSTANCE_TYPE, "In", ["m5.large"]), price="0.01")])
    assert offer(out[0], ct=SPOT).price == 0.01 and not offer(out[0], ct=SPOT).price_estimated
    out = apply_overlays(its, [overlay("rel", (L.INSTANCE_TYPE, "In", ["m5.large"]), priceAdjustment="+1%")])
    assert offer(out[0], ct=SPOT).price_estimated   # an adjustment of an estimate stays an estimate


def test_zone_requirement_selects_offerings_not_types():
    its = B.instance_types("m5.large")
    out = apply_overlays(its, [overlay("zone-b", (L.ZONE, "In", [B.ZONES[1]]), price="9")])
    prices = {(o.zone, o.capacity_type): o.price for o in out[0].offerings}
    assert prices[(B.ZONES[1], OD)] == 9 and prices[(B.ZONES[1], SPOT)] == 9
    assert prices[(B.ZONES[0], OD)] == B.price("m5.large")


@pytest.mark.parametrize("req,selected", [
    ((L.INSTANCE_CPU, "Gte", ["4"]), {"c5.xlarge", "c5.2xlarge", "m5.xlarge", "m5.2xlarge", "m6i.xlarge", "r5.xlarge", "m6g.xlarge"}),
    ((L.INSTANCE_CPU, "Lt", ["4"]), {"c5.large", "m5.large", "m6i.large", "r5.large", "m6g.large"}),
    ((L.ARCH, "NotIn", ["amd64"]), {"m6g.large", "m6g.xlarge"}),
    (("example.com/team", "Exists", None), set()),           # a key nothing defines selects nothing...
    (("example.com/team", "DoesNotExist", None), None),      # ...but its absence selects every type
    ((L.INSTANCE_GPU_COUNT, "DoesNotExist", None), None),
    ((L.CAPACITY_TYPE, "In", [L.CAPACITY_TYPE_RESERVED]), set()),   # no reserved offering here
])
def test_requirement_operators(req, selected):
    its = B.instance_types()
    out = apply_overlays(its, [overlay("o", req, capacity={"example.com/dongle": "1"})])
    got = {it.name for it in out if isinstance(it, OverlaidInstanceType)}
    assert got == ({it.name for it in its} if selected is None else selected)


def test_capacity_adds_extended_resources_to_allocatable():
    its = B.instance_types("m5.large", "c5.large")
    out = by_name(apply_overlays(its, [overlay("fuse", (L.INSTANCE_TYPE, "In", ["m5.large"]),
                                               capacity={"smarter-devices/fuse": "2", "hugepages-2Mi": "100Mi"})]))
    m5 = out["m5.large"]
    assert m5.allocatable["smarter-devices/fuse"] == 2 and m5.allocatable["hugepages-2Mi"] == 100 * 2**20
    assert m5.allocatable[L.RESOURCE_CPU] == B.instance_type("m5.large").allocatable[L.RESOURCE_CPU]
    assert m5.capacity_overlays == {"smarter-devices/fuse": "fuse", "hugepages-2Mi": "fuse"}
    assert "smarter-devices/fuse" not in B.instance_type("m5.large").capacity
    assert out["c5.large"] is B.instance_type("c5.large")


def test_weight_order_higher_first_and_capacity_merged():
    """Karpenter's docs example: overlay-b (10) wins the price, capacity of a (5) and b (10) merge."""
    its = B.instance_types("m5.large")
    a = overlay("overlay-a", (L.INSTANCE_TYPE, "In", ["m5.large"]), weight=5, priceAdjustment="-10%", capacity={"hugepages-2Mi": "50Mi"})
    b = overlay("overlay-b", (L.INSTANCE_TYPE, "In", ["m5.large"]), weight=10, priceAdjustment="-20%", capacity={"custom-device/gpu": "1"})
    res = apply_overlays_by_nodepool({"p": its}, {}, [a, b])
    m5 = res.instance_types["p"][0]
    assert offer(m5).price == pytest.approx(B.price("m5.large") * 0.8) and offer(m5).overlay == "overlay-b"
    assert m5.capacity["hugepages-2Mi"] == 50 * 2**20 and m5.capacity["custom-device/gpu"] == 1
    assert res.conflicts == {}
    assert res.applied == {"overlay-a": 1, "overlay-b": 1}


def test_equal_weights_conflict_and_the_later_name_applies():
    its = B.instance_types("m5.large", "c5.large")
    a = overlay("alpha", (L.INSTANCE_TYPE, "In", ["m5.large", "c5.large"]), weight=3, price="1")
    z = overlay("zulu", (L.INSTANCE_TYPE, "In", ["m5.large"]), weight=3, price="2")
    assert [o.name for o in order_overlays([a, z])] == ["zulu", "alpha"]
    res = apply_overlays_by_nodepool({"p": its}, {}, [a, z])
    assert set(res.conflicts) == {"alpha"} and "zulu" in res.conflicts["alpha"]
    out = by_name(res.instance_types["p"])
    assert offer(out["m5.large"]).price == 2
    assert out["c5.large"] is B.instance_type("c5.large")   # alpha applied nowhere, not even where zulu is silent


def test_equal_weights_without_overlap_both_apply():
    its = B.instance_types("m5.large")
    a = overlay("a", (L.INSTANCE_TYPE, "In", ["m5.large"]), price="1")
    b = overlay("b", (L.INSTANCE_TYPE, "In", ["m5.large"]), capacity={"example.com/x": "1"})
    res = apply_overlays_by_nodepool({"p": its}, {}, [a, b])
    assert res.conflicts == {}
    assert offer(res.instance_types["p"][0]).price == 1 and res.instance_types["p"][0].capacity["example.com/x"] == 1


def test_nodepool_name_and_template_labels_select():
    gpu = B.nodepool("gpu")
    gpu.doc["spec"]["template"]["metadata"] = {"labels": {"team": "ml"}}
    web = B.nodepool("web")
    its = B.instance_types("m5.large")
    by_pool = overlay("pool", (L.NODEPOOL, "In", ["gpu"]), price="3")
    by_label = overlay("label", ("team", "In", ["ml"]), weight=1, capacity={"example.com/x": "1"})
    res = apply_overlays_by_nodepool({"gpu": its, "web": its}, {"gpu": gpu, "web": web}, [by_pool, by_label])
    assert offer(res.instance_types["gpu"][0]).price == 3 and res.instance_types["gpu"][0].capacity["example.com/x"] == 1
    assert res.instance_types["web"][0] is its[0]


def test_a_conflict_in_one_nodepool_keeps_the_overlay_out_of_every_nodepool():
    its = B.instance_types("m5.large")
    a, b = B.nodepool("a"), B.nodepool("b")
    first = overlay("z-first", (L.NODEPOOL, "In", ["a"]), price="1")
    clash = overlay("clash", (L.INSTANCE_TYPE, "In", ["m5.large"]), price="5")
    res = apply_overlays_by_nodepool({"a": its, "b": its}, {"a": a, "b": b}, [first, clash])
    assert set(res.conflicts) == {"clash"}
    assert res.instance_types["b"][0] is its[0]


def test_the_solver_picks_the_type_an_overlay_made_cheapest():
    """A savings plan on r5 makes r5.large cheaper than every other 2-vCPU type: the pod lands there."""
    np_ = B.nodepool()
    pod = B.pod("p", cpu="1", memory="1Gi")
    snap = B.snapshot(nodepools=[np_], pods=[pod])
    before = solve(scheduling_input(snap, [pod])[0])
    assert before.nodeclaims[0].instance_type != "r5.large"
    cheap = overlay("r5-plan", (L.INSTANCE_FAMILY, "In", ["r5"]), price="0.001")
    snap.instance_types = apply_overlays_by_nodepool(snap.instance_types, snap.nodepools, [cheap]).instance_types
    after = solve(scheduling_input(snap, [pod])[0])
    assert after.nodeclaims[0].instance_type == "r5.large" and after.nodeclaims[0].price == pytest.approx(0.001)


def test_capacity_overlay_makes_an_extended_resource_schedulable():
    np_ = B.nodepool()
    pod = B.pod("p", cpu="500m")
    pod["spec"]["containers"][0]["resources"]["requests"]["smarter-devices/fuse"] = "1"
    snap = B.snapshot(nodepools=[np_], pods=[pod])
    assert solve(scheduling_input(snap, [pod])[0]).unschedulable
    fuse = overlay("fuse", (L.INSTANCE_FAMILY, "In", ["c5"]), capacity={"smarter-devices/fuse": "1"})
    snap.instance_types = apply_overlays_by_nodepool(snap.instance_types, snap.nodepools, [fuse]).instance_types
    res = solve(scheduling_input(snap, [pod])[0])
    assert not res.unschedulable and res.nodeclaims[0].instance_type.startswith("c5.")
