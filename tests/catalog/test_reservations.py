"""Issue 30 item 4, the pure rules: capacity reservations as reserved offerings (price, room, expiry, unavailable),
the drift and capacity-block expiry checks, plan's allotment, and `plan --capacity-reservations` placing the first
NodeClaims into an ODCR before on-demand."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws.ec2_catalog import bundled_ec2_data
from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog import reservations as R
from karpenter_lambda.catalog.instancetypes import build_instance_types
from karpenter_lambda.catalog.pricing import PriceBook

REGION = "us-east-1"
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()


def _desc(rid="cr-0aaa", itype="m5.xlarge", zone="us-east-1a", available=4, **kw) -> dict:
    d = {"CapacityReservationId": rid, "InstanceType": itype, "AvailabilityZone": zone, "OwnerId": "123456789012",
         "AvailableInstanceCount": available, "TotalInstanceCount": 4, "InstanceMatchCriteria": "targeted",
         "State": "active", "ReservationType": "default"}
    d.update(kw)
    return d


def _types(reservations, unavailable=frozenset()):
    raw, offerings, zone_ids = bundled_ec2_data(REGION, packaged=True)
    raw = [r for r in raw if r["InstanceType"] in ("m5.xlarge", "c5.xlarge")]
    return {it.name: it for it in build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION,
                                                       zones=["us-east-1a", "us-east-1b"], unavailable=unavailable,
                                                       zone_ids=zone_ids, reservations=reservations)}


def test_parse_keeps_active_unexpired_and_refuses_unknown_kinds():
    rs, problems = R.parse_reservations([
        _desc("cr-0b"), _desc("cr-0a"), _desc("cr-0a"),                       # sorted, deduplicated
        _desc("cr-0c", State="cancelled"),                                      # not active
        _desc("cr-0d", EndDate="2026-11-30T00:00:00Z"),                         # ended
        _desc("cr-0e", InstanceMatchCriteria="someday"),                        # refused, named
    ], NOW)
    assert [r.id for r in rs] == ["cr-0a", "cr-0b"]
    assert problems == ["capacity reservation cr-0e: unsupported instance match criteria 'someday'"]


def test_capacity_block_is_expiring_forty_minutes_before_its_end():
    end = NOW + 39 * 60
    r, _ = R.from_ec2(_desc(ReservationType="capacity-block", EndDate=datetime.fromtimestamp(end, timezone.utc)), NOW)
    assert r.state == R.STATE_EXPIRING and r.end_time == end
    r2, _ = R.from_ec2(_desc(ReservationType="capacity-block", EndDate=datetime.fromtimestamp(NOW + 41 * 60, timezone.utc)), NOW)
    assert r2.state == R.STATE_ACTIVE
    r3, _ = R.from_ec2(_desc(EndDate=datetime.fromtimestamp(end, timezone.utc)), NOW)   # an ODCR never expires early
    assert r3.state == R.STATE_ACTIVE
    labels = {"a": {L.CAPACITY_RESERVATION_ID: "cr-0aaa"}, "b": {L.CAPACITY_RESERVATION_ID: "cr-0other"}, "c": {}}
    assert R.expiring_nodeclaims(labels, [r]) == ["a"] and R.expiring_nodeclaims(labels, [r2]) == []


def test_reserved_offering_is_near_free_limited_and_marked():
    rs = R.parse_reservations([_desc(), _desc("cr-0bbb", zone="us-east-1c"), _desc("cr-0ccc", available=0)], NOW)[0]
    types = _types(rs)
    m5 = types["m5.xlarge"]
    reserved = [o for o in m5.offerings if o.capacity_type == L.CAPACITY_TYPE_RESERVED]
    # us-east-1c is not one of the EC2NodeClass's zones: no offering; a full reservation: an unavailable one
    assert [(o.reservation_id, o.available, o.reservation_capacity) for o in reserved] == [("cr-0aaa", True, 4), ("cr-0ccc", False, 0)]
    od = m5.cheapest_offering(zones={"us-east-1a"}, capacity_types={L.CAPACITY_TYPE_ON_DEMAND})
    assert reserved[0].price == pytest.approx(od.price / 10_000_000) and reserved[0].zone_id
    assert m5.cheapest_offering() is reserved[0]                    # it wins every choice
    assert not any(o.capacity_type == L.CAPACITY_TYPE_RESERVED for o in types["c5.xlarge"].offerings)
    for key in (("cr-0aaa", "us-east-1a", "reserved"), ("cr-0aaa", "any", "reserved")):  # launch / interruption marks
        again = _types(rs, unavailable={key})["m5.xlarge"]
        assert not any(o.available for o in again.offerings if o.reservation_id == "cr-0aaa")


def test_drift_when_the_reservation_no_longer_resolves():
    rs = R.parse_reservations([_desc()], NOW)[0]
    ours = {L.CAPACITY_TYPE: "reserved", L.CAPACITY_RESERVATION_ID: "cr-0aaa"}
    assert R.reservation_drift(ours, rs) is None
    assert R.reservation_drift(ours, []) == R.REASON_RESERVATION_DRIFT
    assert R.reservation_drift({L.CAPACITY_TYPE: "on-demand"}, []) is None
    status = [r.to_status() for r in rs]                     # the EC2NodeClass status entries work as well
    assert R.reservation_drift(ours, status) is None and R.reservation_drift(ours, [{"id": "cr-0zzz"}]) == R.REASON_RESERVATION_DRIFT


def _claim(name, types, ct="reserved", zone="us-east-1a", itype="m5.xlarge", allowed=("reserved", "on-demand")):
    from karpenter_lambda.scheduling.requirements import Requirements

    it = types[itype]
    o = it.cheapest_offering(zones={zone}, capacity_types={ct})
    reqs = Requirements.from_list([{"key": L.CAPACITY_TYPE, "operator": "In", "values": list(allowed)},
                                   {"key": L.ZONE, "operator": "In", "values": [zone]}])
    return SimpleNamespace(name=name, instance_types=list(types.values()), requirements=reqs, instance_type=itype,
                           zone=zone, capacity_type=ct, price=o.price, reason="r")


def test_allotment_holds_a_reservation_to_its_room():
    rs = R.parse_reservations([_desc(available=2)], NOW)[0]
    types = _types(rs)
    claims = [_claim(f"n{i}", types) for i in range(4)]
    got = R.allot_reservations(claims)
    assert got == {"n0": "cr-0aaa", "n1": "cr-0aaa"}
    assert [c.capacity_type for c in claims] == ["reserved", "reserved", "on-demand", "on-demand"]
    # the rest launch as the launch path falls back: the cheapest on-demand offering of the claim's types
    od = min((o.price, it.name) for it in types.values() for o in it.offerings
             if o.capacity_type == "on-demand" and o.zone == "us-east-1a")
    assert (claims[2].price, claims[2].instance_type) == od and "reservation full" in claims[2].reason
    spot_ok = [_claim(f"s{i}", types, allowed=("reserved", "spot", "on-demand")) for i in range(3)]
    R.allot_reservations(spot_ok)
    assert [c.capacity_type for c in spot_ok] == ["reserved", "reserved", "spot"]   # Karpenter's order: spot first


NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge, c5.xlarge, m5.2xlarge]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  capacityReservationSelectorTerms: [{tags: {team: ml}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers: [{name: c, image: nginx, resources: {requests: {cpu: "2", memory: 4Gi}}}]
"""


def test_plan_places_the_first_four_nodes_into_the_odcr(tmp_path, capsys):
    from karpenter_lambda.cli.main import main

    (tmp_path / "m.yaml").write_text(NODEPOOL)
    odcr = {"CapacityReservations": [_desc("cr-0a1b2c3d4e5f60718", Tags=[{"Key": "team", "Value": "ml"}]),
                                     _desc("cr-0ffff", Tags=[{"Key": "team", "Value": "other"}])]}
    (tmp_path / "odcr.json").write_text(json.dumps(odcr))
    assert main(["plan", "-f", str(tmp_path / "m.yaml"), "--capacity-reservations", str(tmp_path / "odcr.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    claims = out["nodeClaims"]
    assert len(claims) == 6
    reserved = [c for c in claims if c["capacityType"] == "reserved"]
    assert len(reserved) == 4 and {c["capacityReservationId"] for c in reserved} == {"cr-0a1b2c3d4e5f60718"}
    assert all(c["instanceType"] == "m5.xlarge" and c["zone"] == "us-east-1a" for c in reserved)
    others = [c for c in claims if c["capacityType"] != "reserved"]
    assert [c["capacityType"] for c in others] == ["on-demand", "on-demand"] and all(c["capacityReservationId"] is None for c in others)
    # without the file: no reservation, everything on-demand
    assert main(["plan", "-f", str(tmp_path / "m.yaml"), "--json"]) == 0
    assert {c["capacityType"] for c in json.loads(capsys.readouterr().out)["nodeClaims"]} == {"on-demand"}
    (tmp_path / "bad.json").write_text('{"nope": 1}')
    assert main(["plan", "-f", str(tmp_path / "m.yaml"), "--capacity-reservations", str(tmp_path / "bad.json")]) == 2
    assert "DescribeCapacityReservations" in capsys.readouterr().err
