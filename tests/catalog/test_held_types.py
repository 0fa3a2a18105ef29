"""Types Karpenter keeps but cannot choose as built, and what a NodeOverlay changes about them (audit 2026-12).

* allocatable below zero (Windows t3a.nano: kube-reserved for 110 pods exceeds its memory) is not floored: Karpenter's
  ``resources.Fits`` fits nothing on such a type, so it is held out of the catalog's list with the reason;
* hugepages capacity (a NodeOverlay's) comes out of allocatable memory, floored at 0 (core ``computeAllocatable``);
* a type no price is known for (r9g.large, not in the bundled table) is held out until an overlay whose only
  requirement is ``node.kubernetes.io/instance-type In`` gives it a ``price`` (aws ``GetOverlayPrice``).

The pure tests build from hand-written descriptions (milliseconds); the last ones run ``karpenter-lambda plan``.
"""

from __future__ import annotations

import json

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodeOverlay
from karpenter_lambda.catalog import InstanceTypes, NodeSettings, PriceBook, build_instance_types
from karpenter_lambda.catalog.overlay import OverlaidOffering, apply_overlays, apply_overlays_by_nodepool
from karpenter_lambda.catalog.types import InstanceType
from karpenter_lambda.cli.main import main

REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b")
MI, GI = 2**20, 2**30
OD, SPOT = L.CAPACITY_TYPE_ON_DEMAND, L.CAPACITY_TYPE_SPOT
WINDOWS = NodeSettings(ami_family="Windows2022")
# bundled on-demand prices of the types below; r9g.large has none
PRICES = {"t3a.nano": 0.0047, "t3a.small": 0.0188, "m5.large": 0.096}


def describe(name: str, vcpus: int, mib: int, arch: str = "x86_64", enis: int = 2, ips: int = 2, **extra) -> dict:
    """A DescribeInstanceTypes entry with the fields the catalog reads."""
    return {"InstanceType": name, "Hypervisor": "nitro", "SupportedUsageClasses": ["on-demand", "spot"],
            "SupportedVirtualizationTypes": ["hvm"], "VCpuInfo": {"DefaultVCpus": vcpus}, "MemoryInfo": {"SizeInMiB": mib},
            "ProcessorInfo": {"SupportedArchitectures": [arch], "SustainedClockSpeedInGhz": 2.2},
            "NetworkInfo": {"Ipv4AddressesPerInterface": ips, "NetworkCards": [{"MaximumNetworkInterfaces": enis}]},
            **extra}


RAW = [describe("t3a.nano", 2, 512), describe("t3a.small", 2, 2048, ips=4), describe("m5.large", 2, 8192, enis=3, ips=10),
       describe("r9g.large", 2, 16384, arch="arm64", enis=3, ips=20)]


def build(settings: NodeSettings | None = None, prices: PriceBook | None = None, **kw) -> InstanceTypes:
    offerings = [{"InstanceType": r["InstanceType"], "Location": z} for r in RAW for z in ZONES]
    return build_instance_types(RAW, offerings, prices or PriceBook(REGION, PRICES), REGION, settings=settings, **kw)


def overlay(name: str, requirements: list[tuple], weight: int | None = None, **spec) -> NodeOverlay:
    reqs = [{"key": k, "operator": op, **({"values": list(v)} if v else {})} for k, op, v in requirements]
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                        "spec": {"requirements": reqs, **spec, **({"weight": weight} if weight else {})}})


def names(its) -> list[str]:
    return [it.name for it in its]


# ----------------------------------------------------------------------------- allocatable below zero
def test_a_type_whose_overhead_exceeds_its_memory_is_held_out_with_the_reason():
    skipped: dict[str, str] = {}
    its = build(WINDOWS, skipped=skipped)
    assert names(its) == ["m5.large", "t3a.small"]         # t3a.nano: Windows reserves 1565Mi of its 473Mi
    why = "allocatable memory below zero: overhead 1565Mi exceeds capacity 473Mi"
    assert skipped["t3a.nano"] == its.skipped["t3a.nano"] == why
    [nano] = [it for it in its.held if it.name == "t3a.nano"]
    assert nano.allocatable[L.RESOURCE_MEMORY] == (473 - 1565) * MI    # not floored at 0
    assert nano.unfit_reason() == why
    assert names(build()) == ["m5.large", "t3a.nano", "t3a.small"]    # AL2023: 4 pods, 74Mi allocatable


def test_every_negative_resource_is_named():
    it = InstanceType("x", {}, {L.RESOURCE_CPU: 1000, L.RESOURCE_MEMORY: GI, L.RESOURCE_PODS: 4},
                      {L.RESOURCE_CPU: 1500, L.RESOURCE_MEMORY: 2 * GI})
    assert it.unfit_reason() == ("allocatable cpu below zero: overhead 1500m exceeds capacity 1; "
                                 "allocatable memory below zero: overhead 2Gi exceeds capacity 1Gi")


def test_overlays_leave_a_held_type_out_unless_they_make_it_fit():
    its = build(WINDOWS)
    device = overlay("dongle", [(L.INSTANCE_FAMILY, "In", ["t3a"])], capacity={"example.com/dongle": "1"})
    assert names(apply_overlays(its, [device])) == ["m5.large", "t3a.small"]
    # Karpenter's computeAllocatable floors memory at 0 once hugepages are taken out: the type then fits pods
    hugepages = overlay("hugepages", [(L.INSTANCE_TYPE, "In", ["t3a.nano"])], capacity={"hugepages-2Mi": "2Mi"})
    out = apply_overlays(its, [hugepages])
    assert names(out) == ["m5.large", "t3a.nano", "t3a.small"]
    assert out[1].allocatable[L.RESOURCE_MEMORY] == 0


# ----------------------------------------------------------------------------- hugepages
def test_hugepages_come_out_of_allocatable_memory_floored_at_zero():
    cap = {L.RESOURCE_CPU: 2000, L.RESOURCE_MEMORY: 8 * GI}
    over = {L.RESOURCE_MEMORY: GI}
    assert InstanceType("a", {}, {**cap, "hugepages-2Mi": 2 * GI}, over).allocatable[L.RESOURCE_MEMORY] == 5 * GI
    both = {**cap, "hugepages-2Mi": 2 * GI, "hugepages-1Gi": 3 * GI}
    assert InstanceType("b", {}, both, over).allocatable[L.RESOURCE_MEMORY] == 2 * GI
    assert InstanceType("c", {}, {**cap, "hugepages-1Gi": 9 * GI}, over).allocatable[L.RESOURCE_MEMORY] == 0
    assert InstanceType("d", {}, cap, over).allocatable[L.RESOURCE_MEMORY] == 7 * GI


def test_a_hugepages_overlay_lowers_allocatable_memory():
    [m5] = [it for it in build() if it.name == "m5.large"]
    [out] = apply_overlays([m5], [overlay("hp", [(L.INSTANCE_TYPE, "In", ["m5.large"])], capacity={"hugepages-2Mi": "2Gi"})])
    assert out.allocatable["hugepages-2Mi"] == 2 * GI
    assert out.allocatable[L.RESOURCE_MEMORY] == m5.allocatable[L.RESOURCE_MEMORY] - 2 * GI


# ----------------------------------------------------------------------------- an overlay's price for an unpriced type
def test_an_unpriced_type_is_held_with_its_offerings_aside():
    its = build()
    assert "r9g.large" not in names(its) and its.skipped["r9g.large"] == "no offering: no price known"
    [r9g] = [it for it in its.held if it.name == "r9g.large"]
    assert r9g.offerings == [] and {(o.zone, o.capacity_type) for o in r9g.unpriced} == {(z, c) for z in ZONES for c in (OD, SPOT)}


def test_an_instance_type_price_overlay_makes_an_unpriced_type_usable():
    out = apply_overlays(build(), [overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")])
    assert names(out) == ["m5.large", "r9g.large", "t3a.nano", "t3a.small"]
    r9g = out[1]
    assert len(r9g.offerings) == 4 and r9g.unpriced == ()
    assert all(isinstance(o, OverlaidOffering) and o.overlay == "r9g" and o.price == 0.1 and o.available
               and o.price_source == "node-overlay" and not o.price_estimated for o in r9g.offerings)


@pytest.mark.parametrize("ov", [
    overlay("two-keys", [(L.INSTANCE_TYPE, "In", ["r9g.large"]), (L.CAPACITY_TYPE, "In", [OD])], price="0.1"),
    overlay("by-family", [(L.INSTANCE_FAMILY, "In", ["r9g"])], price="0.1"),
    overlay("not-in", [(L.INSTANCE_TYPE, "NotIn", ["m5.large"])], price="0.1"),
    overlay("adjustment", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], priceAdjustment="+0.1"),
], ids=lambda ov: ov.name)
def test_only_a_price_overlay_on_instance_types_alone_prices_an_unpriced_type(ov):
    assert "r9g.large" not in names(apply_overlays(build(), [ov]))


def test_a_price_overlay_in_conflict_prices_nothing():
    # equal weights, applied in reverse name order: "whole-r" changes r9g.large's price first, so "r9g" conflicts
    cat = overlay("whole-r", [(L.INSTANCE_CATEGORY, "In", ["r"])], price="0.5")
    own = overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")
    res = apply_overlays_by_nodepool({"p": build()}, {}, [cat, own])
    assert "r9g.large" not in names(res.instance_types["p"])
    assert set(res.conflicts) == {"r9g"} and "whole-r" in res.conflicts["r9g"] and "r9g" not in res.applied


def test_a_heavier_adjustment_applies_to_the_overlay_price():
    own = overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")
    cut = overlay("cut", [(L.INSTANCE_CATEGORY, "In", ["r"])], weight=10, priceAdjustment="-10%")
    [r9g] = [it for it in apply_overlays(build(), [own, cut]) if it.name == "r9g.large"]
    assert [(o.price, o.overlay) for o in r9g.offerings] == [(pytest.approx(0.09), "cut")] * 4


def test_the_unpriced_offerings_of_a_priced_type_take_the_overlay_price():
    # a real spot price, no on-demand price: spot offerings in the list, on-demand ones aside until an overlay prices them
    book = PriceBook(REGION, PRICES).with_spot({("r9g.large", z): 0.03 for z in ZONES})
    [r9g] = [it for it in build(prices=book) if it.name == "r9g.large"]
    assert {o.capacity_type for o in r9g.offerings} == {SPOT} and {o.capacity_type for o in r9g.unpriced} == {OD}
    [out] = apply_overlays([r9g], [overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")])
    assert sorted((o.capacity_type, o.price) for o in out.offerings) == [(OD, 0.1)] * 2 + [(SPOT, 0.1)] * 2


def test_held_types_are_shared_by_nodepools_on_one_catalog():
    its = build()
    res = apply_overlays_by_nodepool({"a": its, "b": its}, {}, [overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")])
    assert res.instance_types["a"][1] is res.instance_types["b"][1] and res.instance_types["a"][1].name == "r9g.large"


# ----------------------------------------------------------------------------- end to end: karpenter-lambda plan
NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-test
  amiFamily: {family}
  amiSelectorTerms: [{{alias: {alias}@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: test}}}}]
"""


def nodepool(*requirements: str, taint: bool = False) -> str:
    reqs = "".join(f"\n        - {r}" for r in ("{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}",) + requirements)
    taints = "\n      taints: [{key: os, value: windows, effect: NoSchedule}]" if taint else ""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: pool}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}{taints}
      requirements:{reqs}
"""


def pod(requests: str, spec: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: app, namespace: default}}
spec:{spec}
  containers: [{{name: c, image: nginx, resources: {{requests: {requests}, limits: {requests}}}}}]
"""


def plan(tmp_path, capsys, *docs: str) -> dict:
    path = tmp_path / "all.yaml"
    path.write_text("---".join(docs))
    code = main(["plan", "--json", "-f", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 3), out
    return out


def chosen(out: dict) -> list[tuple[str, float]]:
    return [(nc["instanceType"], nc["pricePerHour"]) for nc in out["nodeClaims"]]


def test_plan_never_launches_a_windows_type_whose_memory_is_overcommitted(tmp_path, capsys):
    out = plan(tmp_path, capsys, NODECLASS.format(family="Windows2022", alias="windows2022"),
               nodepool("{key: karpenter.k8s.aws/instance-category, operator: In, values: [t]}", taint=True),
               pod("{cpu: 100m}", "\n  nodeSelector: {kubernetes.io/os: windows}\n  tolerations: [{key: os, operator: Exists}]"))
    assert chosen(out) == [("t3a.small", 0.0188)]      # not t3a.nano (0.0047): allocatable memory -1092Mi
    assert not {"t3a.nano", "t3.nano", "t2.nano", "t3a.micro", "t3.micro", "t2.micro", "t1.micro"} & set(out["nodeClaims"][0]["instanceTypes"])


def test_plan_subtracts_overlay_hugepages_from_memory(tmp_path, capsys):
    hugepages = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: hugepages}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  capacity: {hugepages-2Mi: 4Gi}
"""
    docs = (NODECLASS.format(family="AL2023", alias="al2023"),
            nodepool("{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}"), hugepages)
    out = plan(tmp_path, capsys, *docs, pod("{cpu: 100m, memory: 4Gi, hugepages-2Mi: 1Gi}"))
    assert chosen(out) == [] and "at most 2807Mi" in out["unschedulable"][0]["reason"]   # 6903Mi - 4Gi
    assert chosen(plan(tmp_path, capsys, *docs, pod("{cpu: 100m, memory: 2Gi, hugepages-2Mi: 1Gi}"))) == [("m5.large", 0.096)]


def test_plan_launches_an_unpriced_type_at_its_overlay_price(tmp_path, capsys):
    price = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: r9g-preview-price}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [r9g.large]}]
  price: "0.1"
"""
    docs = (NODECLASS.format(family="AL2023", alias="al2023"), nodepool("{key: karpenter.k8s.aws/instance-family, operator: In, values: [r9g]}"),
            pod("{cpu: 500m, memory: 1Gi}", "\n  nodeSelector: {node.kubernetes.io/instance-type: r9g.large}"))
    assert chosen(plan(tmp_path, capsys, *docs)) == []
    [nc] = plan(tmp_path, capsys, *docs, price)["nodeClaims"]
    assert (nc["instanceType"], nc["pricePerHour"], nc["priceOverlay"]) == ("r9g.large", 0.1, "r9g-preview-price")


def test_a_pod_that_only_held_types_match_is_told_why_they_are_left_out(tmp_path, capsys):
    # the NodePool asks for nano and micro types only: under Windows every one of them is held (memory below zero)
    out = plan(tmp_path, capsys, NODECLASS.format(family="Windows2022", alias="windows2022"),
               nodepool("{key: karpenter.k8s.aws/instance-size, operator: In, values: [nano, micro]}",
                        "{key: karpenter.k8s.aws/instance-category, operator: In, values: [t]}", taint=True),
               pod("{cpu: 100m}", "\n  nodeSelector: {kubernetes.io/os: windows}\n  tolerations: [{key: os, operator: Exists}]"))
    assert out["nodeClaims"] == []
    (u,) = out["unschedulable"]
    assert "no instance type in NodePool pool matches" in u["reason"]
    assert "t3.nano" in u["reason"] and "left out: allocatable memory below zero" in u["reason"], u["reason"]


def test_overlays_keep_the_held_types_they_leave_out():
    ov = overlay("r9g", [(L.INSTANCE_TYPE, "In", ["r9g.large"])], price="0.1")
    its = build()                                        # r9g.large held: no price
    assert [it.name for it in its.held] == ["r9g.large"]
    out = apply_overlays_by_nodepool({"a": its}, {}, [ov]).instance_types["a"]
    assert "r9g.large" in names(out) and out.held == ()
    win = build(WINDOWS)                                 # t3a.nano held: memory below zero, which a price cannot fix
    out = apply_overlays_by_nodepool({"a": win}, {}, [ov]).instance_types["a"]
    assert [it.name for it in out.held] == ["t3a.nano"] and "t3a.nano" not in names(out)
    assert out.skipped == win.skipped
    # no overlay at all: the list and its held types as built
    same = apply_overlays_by_nodepool({"a": win}, {}, []).instance_types["a"]
    assert names(same) == names(win) and [it.name for it in same.held] == ["t3a.nano"]
