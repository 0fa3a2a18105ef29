"""Which offerings a NodeOverlay's requirements select, on the keys Karpenter treats specially:

* the capacity-reservation keys (``karpenter.k8s.aws/capacity-reservation-id``, ``-type``, ``-interruptible``) are
  ``DoesNotExist`` on an on-demand or spot offering (aws ``pkg/providers/instancetype/offering/base_resolver.go``), so an
  overlay asking ``In`` / ``Exists`` on them reprices the reserved offering only (core ``getOverlaidOfferings`` ->
  ``Offerings.Compatible``);
* old label keys are read under their current names (core ``requirement.go`` -> ``NormalizedLabels``, plus the AWS
  provider's ``topology.ebs.csi.aws.com/zone``);
* a zone ID an offering does not know stays undefined (a well-known label: any requirement passes);
* a NodeClaim planned on overlaid types carries ``karpenter.sh/price-overlay-applied`` /
  ``karpenter.sh/capacity-overlay-applied`` (core ``nodeclaimtemplate.go`` ``ToNodeClaim``)."""

from __future__ import annotations

import builders as B
import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodeOverlay
from karpenter_lambda.catalog.overlay import (CAPACITY_OVERLAY_APPLIED, PRICE_OVERLAY_APPLIED, apply_overlays,
                                              apply_overlays_by_nodepool, offering_overlay)
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.inputs import scheduling_input

OD, SPOT, RES = L.CAPACITY_TYPE_ON_DEMAND, L.CAPACITY_TYPE_SPOT, L.CAPACITY_TYPE_RESERVED
ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"


def overlay(reqs: list[dict], name: str = "x", **spec) -> NodeOverlay:
    spec = {"requirements": reqs, **(spec or {"price": "5"})}
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                        "spec": spec})


def req(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def m5_large() -> InstanceType:
    """m5.large in one zone: on-demand $0.096, spot $0.03 and a capacity block cr-1."""
    return InstanceType(
        "m5.large",
        {L.INSTANCE_TYPE: "m5.large", L.ARCH: "amd64", L.OS: "linux", L.INSTANCE_FAMILY: "m5", L.REGION: "us-east-1"},
        {"cpu": 2000, "memory": 8 * 2**30, "pods": 29},
        offerings=[Offering(ZONE_A, OD, 0.096, zone_id="use1-az1"), Offering(ZONE_A, SPOT, 0.03, zone_id="use1-az1"),
                   Offering(ZONE_A, RES, 0.0001, zone_id="use1-az1", reservation_id="cr-1",
                            reservation_type="capacity-block", reservation_capacity=2)])


def prices(reqs: list[dict]) -> dict[str, float]:
    (out,) = apply_overlays([m5_large()], [overlay(reqs)])
    return {o.capacity_type: o.price for o in out.offerings}


BASE = {OD: 0.096, SPOT: 0.03, RES: 0.0001}


@pytest.mark.parametrize("reqs", [
    [req(L.CAPACITY_RESERVATION_ID, "In", "cr-1")],
    [req(L.CAPACITY_RESERVATION_ID, "Exists")],
    [req(L.CAPACITY_RESERVATION_TYPE, "In", "capacity-block")],
    [req(L.CAPACITY_RESERVATION_TYPE, "Exists")],
    [req(L.CAPACITY_RESERVATION_INTERRUPTIBLE, "In", "false")],
], ids=["id-In", "id-Exists", "type-In", "type-Exists", "interruptible-In"])
def test_a_reservation_requirement_reprices_the_reserved_offering_only(reqs):
    assert prices(reqs) == {OD: BASE[OD], SPOT: BASE[SPOT], RES: 5.0}


def test_not_in_another_reservation_keeps_every_offering():
    """NotIn passes a DoesNotExist key: on-demand and spot are selected, and so is cr-1 (not cr-2)."""
    assert prices([req(L.CAPACITY_RESERVATION_ID, "NotIn", "cr-2")]) == {OD: 5.0, SPOT: 5.0, RES: 5.0}


def test_a_reservation_overlay_reprices_nothing_on_a_type_without_reservations():
    it = m5_large()
    it.offerings = it.offerings[:2]
    (out,) = apply_overlays([it], [overlay([req(L.CAPACITY_RESERVATION_ID, "In", "cr-1")])])
    assert out is it and not any(offering_overlay(o) for o in out.offerings)


def test_an_unknown_zone_id_stays_undefined():
    """An offering in a zone whose ID is not known matches a zone-ID requirement (as upstream: the offering has no
    zone-ID requirement and the key is well-known); the type is selected by its other offering's zone ID."""
    it = m5_large()
    it.offerings = [Offering(ZONE_A, OD, 0.096, zone_id="use1-az1"), Offering(ZONE_B, OD, 0.096)]
    (out,) = apply_overlays([it], [overlay([req(L.ZONE_ID, "In", "use1-az1")])])
    assert [o.price for o in out.offerings] == [5.0, 5.0]
    (out,) = apply_overlays([it], [overlay([req(L.ZONE_ID, "In", "use1-az4")])])
    assert out is it


@pytest.mark.parametrize("key,value", [
    ("beta.kubernetes.io/arch", "amd64"),
    ("beta.kubernetes.io/os", "linux"),
    ("beta.kubernetes.io/instance-type", "m5.large"),
    ("failure-domain.beta.kubernetes.io/zone", ZONE_A),
    ("failure-domain.beta.kubernetes.io/region", "us-east-1"),
    ("topology.ebs.csi.aws.com/zone", ZONE_A),
])
def test_old_label_keys_select_as_their_current_keys(key, value):
    assert L.normalize_key(key) != key   # the shared table maps it (api/labels.NORMALIZED)
    assert prices([req(key, "In", value)]) == {OD: 5.0, SPOT: 5.0, RES: 5.0}
    # and the other way round: a value the type does not have, or NotIn its value, selects nothing
    assert prices([req(key, "In", "nope")]) == BASE
    assert prices([req(key, "NotIn", value)]) == BASE


def test_an_old_zone_key_selects_offerings_by_zone():
    it = m5_large()
    it.offerings = [Offering(ZONE_A, OD, 0.096), Offering(ZONE_B, OD, 0.096)]
    (out,) = apply_overlays([it], [overlay([req("failure-domain.beta.kubernetes.io/zone", "In", ZONE_B)])])
    assert [o.price for o in out.offerings] == [0.096, 5.0]


def test_a_planned_nodeclaim_says_an_overlay_priced_or_sized_its_types():
    np_ = B.nodepool()
    pod = B.pod("p", cpu="1", memory="1Gi")
    snap = B.snapshot(nodepools=[np_], pods=[pod])
    (plain,) = solve(scheduling_input(snap, [pod])[0]).nodeclaims
    assert PRICE_OVERLAY_APPLIED not in plain.annotations() and CAPACITY_OVERLAY_APPLIED not in plain.annotations()
    ovs = [overlay([req(L.INSTANCE_FAMILY, "In", "r5")], "r5-plan", price="0.001"),
           overlay([req(L.INSTANCE_FAMILY, "In", "r5")], "fuse", capacity={"smarter-devices/fuse": "1"})]
    snap.instance_types = apply_overlays_by_nodepool(snap.instance_types, snap.nodepools, ovs).instance_types
    (nc,) = solve(scheduling_input(snap, [pod])[0]).nodeclaims
    assert nc.instance_type == "r5.large"
    ann = nc.annotations()
    assert ann[PRICE_OVERLAY_APPLIED] == "true" and ann[CAPACITY_OVERLAY_APPLIED] == "true"
    assert ann[L.NODECLAIM_MIN_VALUES_RELAXED] == "false"
