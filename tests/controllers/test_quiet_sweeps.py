"""What forces the drift and lifecycle sweeps to run in full (issue 32: quiet sweeps read only what changed).

Pure decisions on small objects from tests/builders.py, in milliseconds: ``quiet_drift.skip_reason`` /
``forced_reasons`` / ``valid_until`` / ``ami_parameter_names`` and ``quiet_lifecycle.decide`` / ``forced_reasons`` /
``instances_settled``.  The end-to-end half (the same events with and without the shortcuts) is
tests/sim/test_sweep_shortcuts.py.
"""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.controllers import quiet_drift as qd
from karpenter_lambda.controllers import quiet_lifecycle as ql

from builders import T0, claimed_node, iso, nodeclass, nodepool, nodeclaim, snapshot

MARKER = {"fingerprint": "f", "validUntil": T0 + 100, "at": T0 - 60}


# -- drift ----------------------------------------------------------------------------------------------------------

def test_drift_skips_only_with_a_valid_marker_of_the_same_fingerprint():
    assert qd.skip_reason(MARKER, "f", [], T0) is None
    assert qd.skip_reason(None, "f", [], T0) == "no quiet sweep recorded"
    assert qd.skip_reason(MARKER, "g", [], T0) == "changed since the last quiet sweep"
    assert qd.skip_reason(MARKER, "f", [], T0 + 100) == "the last quiet sweep's marker expired"
    assert qd.skip_reason(MARKER, "f", ["NodeClaim a is marked Drifted"], T0) == "NodeClaim a is marked Drifted"


def test_a_quiet_cluster_forces_nothing():
    nc, node = claimed_node("a")
    assert qd.forced_reasons({"NodeClaim": [nc]}, [node], {}) == []


def test_in_flight_drifted_reserved_or_tainted_forces_the_full_drift_sweep():
    nc, node = claimed_node("a")
    assert qd.forced_reasons({"NodeClaim": [nc]}, [node], {"a": object()}) == ["1 disruption(s) in flight"]
    drifted = nodeclaim("b", status={"conditions": [{"type": "Drifted", "status": "True", "reason": "AMIDrift"}]})
    assert qd.forced_reasons({"NodeClaim": [drifted]}, [], {}) == ["NodeClaim b is marked Drifted"]
    reserved = nodeclaim("c", labels={L.CAPACITY_RESERVATION_ID: "cr-123"})
    assert qd.forced_reasons({"NodeClaim": [reserved]}, [], {}) == ["NodeClaim c runs in capacity reservation cr-123"]
    _nc, tainted = claimed_node("d", taints=[dict(L.DISRUPTED_TAINT)])
    assert qd.forced_reasons({"NodeClaim": []}, [tainted], {}) == [
        f"node node-d has the {L.DISRUPTED_TAINT_KEY} taint"]


def test_the_ami_parameters_read_every_sweep():
    names = qd.ami_parameter_names(_with_terms([{"alias": "al2023@latest"}]), "1.31")
    assert names and all(n.startswith("/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/") for n in names)
    assert len(names) == len(set(names))
    assert qd.ami_parameter_names(_with_terms([{"ssmParameter": "/my/ami"}, {"tags": {"team": "x"}}]), "1.31") == ["/my/ami"]
    assert qd.ami_parameter_names(_with_terms([{"id": "ami-0123456789abcdef0"}]), "1.31") == []


def test_the_drift_marker_holds_until_the_first_expiry_or_the_ttl():
    now = T0
    young = nodeclaim("young", created=now - 60)                  # default expireAfter 720h: far away
    assert qd.valid_until(snapshot(young, now=now)) == now + qd.DRIFT_TTL
    pool = nodepool("default")
    pool.spec["template"]["spec"]["expireAfter"] = "10m"
    old = nodeclaim("old", created=now - 480)                     # expires in 2 minutes
    assert qd.valid_until(snapshot(old, young, now=now, nodepools=[pool])) == now + 120
    gone = nodeclaim("gone", created=now - 590, deleting=True)   # deleting: not waited for
    assert qd.valid_until(snapshot(old, gone, now=now, nodepools=[pool])) == now + 120


def _with_terms(terms: list[dict]):
    nc = nodeclass("a")
    nc.spec["amiSelectorTerms"] = terms
    return nc


# -- lifecycle ------------------------------------------------------------------------------------------------------

LC_MARKER = {**MARKER, "gcAt": T0 - 30, "instances": "d"}


def test_lifecycle_decides_skip_check_or_full():
    assert ql.decide(LC_MARKER, "f", [], T0) == ("skip", "")
    assert ql.decide(LC_MARKER, "f", [], T0 - 30 + ql.GC_INTERVAL) == ("check", "instance check due")
    assert ql.decide(None, "f", [], T0)[0] == "full"
    assert ql.decide(LC_MARKER, "g", [], T0) == ("full", "changed since the last quiet sweep")
    assert ql.decide(LC_MARKER, "f", [], T0 + 100) == ("full", "the last quiet sweep's marker expired")
    assert ql.decide(LC_MARKER, "f", ["NodeClaim a is deleting"], T0) == ("full", "NodeClaim a is deleting")


def test_a_settled_cluster_forces_no_lifecycle_work():
    nc, node = claimed_node("a")
    assert ql.forced_reasons([nc], [node]) == []


def test_anything_under_way_forces_the_full_lifecycle_sweep():
    nc, node = claimed_node("a")
    assert ql.forced_reasons([nodeclaim("a", deleting=True)], [node]) == ["NodeClaim a is deleting"]
    launching = nodeclaim("b")
    launching.status.pop("providerID")
    assert ql.forced_reasons([launching], []) == ["NodeClaim b is launching"]
    assert ql.forced_reasons([nodeclaim("c", initialized=False)], []) == ["NodeClaim c is not registered and initialized"]
    assert ql.forced_reasons([nc], []) == ["NodeClaim a has no node"]
    _nc, sick = claimed_node("a", ready=False)
    sick["status"]["conditions"][0]["lastTransitionTime"] = iso(T0 - 60)
    assert ql.forced_reasons([nc], [sick]) == ["node node-a is unhealthy"]
    node["metadata"]["deletionTimestamp"] = iso(T0)
    assert ql.forced_reasons([nc], [node]) == ["node node-a is deleting"]


def test_an_unhealthy_node_that_is_not_ours_forces_nothing():
    nc, node = claimed_node("a")
    _other, stranger = claimed_node("z", ready=False)
    stranger["status"]["conditions"][0]["lastTransitionTime"] = iso(T0 - 60)
    assert ql.forced_reasons([nc], [node, stranger]) == []


def test_instances_settle_when_every_live_instance_is_a_nodeclaims():
    a, b = nodeclaim("a"), nodeclaim("b")

    def inst(state: str) -> dict:
        return {"State": {"Name": state}}

    assert ql.instances_settled({"i-a": inst("running"), "i-b": inst("running")}, [a, b])
    assert ql.instances_settled({"i-a": inst("running"), "i-b": inst("pending"), "i-x": inst("terminated")}, [a, b])
    assert not ql.instances_settled({"i-a": inst("running")}, [a, b])                       # b's instance not listed
    assert not ql.instances_settled({"i-a": inst("running"), "i-b": inst("shutting-down")}, [a, b])   # b's going
    assert not ql.instances_settled({"i-a": inst("running"), "i-b": inst("running"), "i-x": inst("running")}, [a, b])
    assert ql.instances_digest({"i-a": inst("running")}) == ql.instances_digest({"i-a": inst("running")})
    assert ql.instances_digest({"i-a": inst("running")}) != ql.instances_digest({"i-a": inst("stopping")})


def test_a_deleting_node_holding_the_termination_finalizer_without_nodeclaim_forces_the_full_sweep():
    """lifecycle_gc.finalize_orphan_nodes drains and releases it: every minute, not at the quiet sweep's cadence."""
    _nc, node = claimed_node("a")
    node["metadata"]["deletionTimestamp"] = iso(T0)
    assert ql.forced_reasons([], [node]) == []      # not holding it: it goes by itself
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    assert ql.forced_reasons([], [node]) == ["node node-a is deleting and holds the termination finalizer"]
