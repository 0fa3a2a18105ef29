"""Spot interruption warnings through EventBridge -> SQS -> the real handler (moto + the local Kubernetes API)."""

import json

from karpenter_lambda.api import labels as wk
from karpenter_lambda.api.labels import decode_replaces
from karpenter_lambda.controllers.interrupt import REPLACES_ANNOTATION
from karpenter_lambda.controllers.termination import DELETION_REASON_ANNOTATION
from karpenter_lambda.sim.nodes import set_node_ready

from .interruption_world import spot_warning, state_change

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def record_fleets(ec2) -> list:
    """The CreateFleet requests' (type, zone subnet) overrides, as sent."""
    calls = []
    ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                             lambda params, **kw: calls.append([(o["InstanceType"], o["SubnetId"])
                                                                for c in params["LaunchTemplateConfigs"]
                                                                for o in c["Overrides"]]))
    return calls


def subnet_zone(w, subnet_id):
    return w.ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["AvailabilityZone"]


def finish_deletion(iw, name, sweeps=6):
    """Lifecycle sweeps (the termination flow: drain, then the instance) until the NodeClaim is gone."""
    for _ in range(sweeps):
        if iw.w.store.get("NodeClaim", name) is None:
            return
        iw.w.clock.advance(30)
        iw.w.sweep()
    assert iw.w.store.get("NodeClaim", name) is None, iw.w.store.get("NodeClaim", name).to_dict()


def test_spot_warning_replaces_elsewhere_then_drains_and_terminates(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([3])
    old, iid = a["nodeClaim"], a["instance"]["InstanceId"]
    it, zone = old.labels[wk.INSTANCE_TYPE], old.labels[wk.ZONE]
    assert old.labels[wk.CAPACITY_TYPE] == "spot"
    fleets = record_fleets(w.ec2)

    resp = iw.deliver(spot_warning(iid, w.clock.isoformat()))
    assert resp == {"batchItemFailures": []}
    r = iw.report
    assert [(x["kind"], x["instanceId"], x["nodeClaim"]) for x in r.received] == [("SpotInterruption", iid, old.name)]
    # the offering is marked unavailable (the ICE cache, 3 minutes)
    assert (it, zone, "spot") in w.env.unavailable.all()
    assert r.unavailable == [{"instanceType": it, "zone": zone, "capacityType": "spot", "nodeClaim": old.name,
                              "reason": "SpotInterruption"}]
    # one replacement, launched at once, never in the unavailable offering (not even offered to CreateFleet)
    (d,) = r.disrupted
    assert (d["nodeClaim"], d["reason"], d["nodePool"], d["instanceType"], d["zone"], d["capacityType"]) == \
        (old.name, "SpotInterrupted", "spot", it, zone, "spot")
    (new_name,) = d["replacements"]
    (overrides,) = fleets
    assert (it, zone) not in {(t, subnet_zone(w, s)) for t, s in overrides}
    new = w.store.get("NodeClaim", new_name)
    # the one replaces format (a JSON list, api.labels.decode_replaces reads it): the interrupted NodeClaim
    assert decode_replaces(new.annotations[REPLACES_ANNOTATION]) == [old.name]
    assert sorted(json.loads(new.annotations["karpenter-lambda.io/nominated-pods"])) == \
        sorted(f"default/{p['metadata']['name']}" for p in a["pods"])
    (inst,) = [i for i in w.instances() if i["InstanceId"] != iid]
    assert (inst["InstanceType"], inst["Placement"]["AvailabilityZone"]) != (it, zone)
    # the old NodeClaim: tainted (Karpenter v1's cordon) and deleting; the instance is not terminated by the handler
    old_now = w.store.get("NodeClaim", old.name)
    assert old_now.metadata.get("deletionTimestamp")
    assert old_now.annotations[DELETION_REASON_ANNOTATION] == "SpotInterrupted"
    node = w.server.store.get("nodes", a["node"]["metadata"]["name"])
    assert DISRUPTED in [{"key": t["key"], "effect": t["effect"]} for t in node["spec"].get("taints") or []]
    assert iw.state(iid) == "running"

    # the replacement joins; the termination flow drains the old node and terminates the instance
    w.join(inst, ready=True)
    finish_deletion(iw, old.name)
    assert iw.state(iid) in ("shutting-down", "terminated")
    assert w.server.store.get("nodes", a["node"]["metadata"]["name"]) is None
    assert w.store.get("NodeClaim", new_name).is_true("Initialized")
    # the displaced pods (recreated by their ReplicaSet once evicted or garbage collected) bind on the replacement
    for p in a["pods"]:
        cur = w.server.store.get("pods", p["metadata"]["name"], "default")
        if cur is not None:
            w.server.store.delete("pods", p["metadata"]["name"], "default")
    from karpenter_lambda.sim.world import make_pod

    w.add_pods([make_pod(p["metadata"]["name"], owner="app0") for p in a["pods"]])
    w.schedule()
    nodes = {(p.get("spec") or {}).get("nodeName") for p in w.server.store.list("pods")}
    assert nodes == {w.store.get("NodeClaim", new_name).status["nodeName"]}


def test_duplicate_warning_does_nothing_twice(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid = a["instance"]["InstanceId"]
    body = json.dumps(spot_warning(iid, w.clock.isoformat()))
    iw.send_raw(body, body)  # the same event delivered twice in one batch (SQS at-least-once)
    assert iw.invoke(iw.receive(expect=2)) == {"batchItemFailures": []}
    first = iw.report
    assert len(first.received) == 1 and len(first.disrupted) == 1 and len(first.replacements) == 1
    deleting_at = w.store.get("NodeClaim", a["nodeClaim"].name).metadata["deletionTimestamp"]
    claims, instances = len(w.store.list("NodeClaim")), len(w.instances())

    w.clock.advance(5)
    iw.send_raw(body)  # and once more, later
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    again = iw.report
    assert again.disrupted == [] and again.replacements == [] and again.errors == []
    assert [x["reason"] for x in again.ignored] == ["NodeClaim already deleting"]
    assert (len(w.store.list("NodeClaim")), len(w.instances())) == (claims, instances)
    assert w.store.get("NodeClaim", a["nodeClaim"].name).metadata["deletionTimestamp"] == deleting_at
    assert iw.queue_depth() == 0


def test_warning_after_the_nodeclaim_is_gone_is_dropped(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid = a["instance"]["InstanceId"]
    event = spot_warning(iid, w.clock.isoformat())
    iw.deliver(event)
    finish_deletion(iw, a["nodeClaim"].name)
    instances = {i["InstanceId"] for i in w.instances()}
    w.clock.advance(200)  # the first mark expired
    iw.send_raw(json.dumps(event))
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    r = iw.report
    assert [x["nodeClaim"] for x in r.received] == [None]
    assert r.disrupted == [] and r.unavailable == [] and r.errors == []
    assert "no NodeClaim" in r.ignored[0]["reason"]
    assert {i["InstanceId"] for i in w.instances()} == instances and w.env.unavailable.all() == set()


def test_warning_after_the_terminated_notice_is_dropped(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.ec2.terminate_instances(InstanceIds=[iid])  # EC2 reclaimed it before the warning got through
    set_node_ready(w.server, a["node"]["metadata"]["name"], False)
    iw.deliver(state_change(iid, "terminated", w.clock.isoformat()))
    assert iw.report.deleted == [{"nodeClaim": name, "reason": "InstanceTerminated"}]
    assert w.store.get("NodeClaim", name) is None
    iw.deliver(spot_warning(iid, w.clock.isoformat()))
    r = iw.report
    assert r.disrupted == [] and r.replacements == [] and r.unavailable == [] and r.errors == []
    assert w.instances() == [] and w.store.list("NodeClaim") == []


def test_foreign_instances_are_acknowledged_and_dropped(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    image = w.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    foreign = w.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large")["Instances"][0]
    fid = foreign["InstanceId"]
    resp = iw.deliver(spot_warning(fid, w.clock.isoformat()), state_change(fid, "stopping", w.clock.isoformat()))
    assert resp == {"batchItemFailures": []} and iw.queue_depth() == 0
    r = iw.report
    assert [x["nodeClaim"] for x in r.received] == [None, None]
    assert r.disrupted == [] and r.unavailable == [] and len(r.ignored) == 2
    assert not w.store.get("NodeClaim", a["nodeClaim"].name).metadata.get("deletionTimestamp")
    assert len(w.instances()) == 2 and w.env.unavailable.all() == set()
