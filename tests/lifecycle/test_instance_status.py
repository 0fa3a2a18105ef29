"""EC2 instance status checks (Karpenter's instance status controller, v1.12+/v1.13): the pure rule
(disruption/instance_health.py) on plain ``DescribeInstanceStatus`` items, the adapter (adapters/aws/instance_status.py)
against moto, and the lifecycle sweep end to end (the real handler in the World: moto + the local Kubernetes API).

moto answers DescribeInstanceStatus for real but always with passing checks and no events; the impaired and scheduled
states are put on moto's own Instance model (its ``instance_status`` / ``system_status`` / ``events`` properties), so
the request, moto's response and boto3's parsing stay real."""

from __future__ import annotations

import datetime as dt

import pytest
from moto.ec2.models.instances import Instance

import builders
from builders import T0
from karpenter_lambda.adapters.aws import instance_status as adapter
from karpenter_lambda.api import labels as wk
from karpenter_lambda.api.times import to_epoch
from karpenter_lambda.controllers.quiet_lifecycle import CHECKED, SKIPPED
from karpenter_lambda.controllers.runtime import Config
from karpenter_lambda.disruption.instance_health import (
    INSTANCE_UNHEALTHY,
    SCHEDULED_CHANGE,
    SCHEDULED_EVENT_CODES,
    UNHEALTHY_THRESHOLD,
    plan_instance_health,
)
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests
from sim_events import Events


def utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc)


def check(status: str = "ok", failed_since: float | None = None, detail: str | None = None) -> dict:
    d = {"Name": "reachability", "Status": detail or ("failed" if status == "impaired" else "passed")}
    if failed_since is not None:
        d["ImpairedSince"] = utc(failed_since)
    return {"Status": status, "Details": [d]}


def item(iid: str, instance: dict | None = None, system: dict | None = None, events=()) -> dict:
    return {"InstanceId": iid, "InstanceState": {"Code": 16, "Name": "running"},
            "InstanceStatus": instance or check(), "SystemStatus": system or check(), "Events": list(events)}


def event(code: str, description: str = "", not_before: float | None = None) -> dict:
    e = {"Code": code, "Description": description}
    if not_before is not None:
        e["NotBefore"] = utc(not_before)
    return e


def claims(*names: str, **kw) -> dict:
    """instance id -> NodeClaim (the builders' provider ids: ``i-<name>``)."""
    return {f"i-{n}": builders.nodeclaim(n, **kw) for n in names}


# -- the pure rule ---------------------------------------------------------------------------------------------------

def test_impaired_119_seconds_waits_121_is_forceful():
    ncs = claims("a", "b")
    plan = plan_instance_health([item("i-a", instance=check("impaired", T0 - 119)),
                                 item("i-b", instance=check("impaired", T0 - 121))], ncs, T0)
    assert [a.nodeclaim for a in plan.forceful] == ["b"]
    assert [a.nodeclaim for a in plan.waiting] == ["a"] and not plan.graceful
    (b,) = plan.forceful
    assert b.forceful and b.reason == INSTANCE_UNHEALTHY and b.categories == ["InstanceStatus"]
    assert b.detail == "InstanceStatus reachability failed for 2m1s"
    # exactly the threshold counts (upstream: Since(ImpairedSince) >= 120s)
    assert plan_instance_health([item("i-a", instance=check("impaired", T0 - UNHEALTHY_THRESHOLD))], ncs, T0).forceful


def test_system_status_and_instance_status_both_count():
    ncs = claims("a", "b", "c")
    plan = plan_instance_health([item("i-a", system=check("impaired", T0 - 300)),
                                 item("i-b", instance=check("impaired", T0 - 300)),
                                 item("i-c", instance=check("impaired", T0 - 300), system=check("impaired", T0 - 200))],
                                ncs, T0)
    assert {a.nodeclaim: a.categories for a in plan.forceful} == {
        "a": ["SystemStatus"], "b": ["InstanceStatus"], "c": ["InstanceStatus", "SystemStatus"]}


def test_only_failed_details_of_an_impaired_summary_count():
    ncs = claims("a", "b", "c")
    plan = plan_instance_health([
        item("i-a", instance=check("impaired", T0 - 600, detail="insufficient-data")),
        item("i-b", instance=check("insufficient-data", T0 - 600, detail="failed")),
        item("i-c", instance={"Status": "initializing", "Details": [{"Name": "reachability", "Status": "initializing"}]}),
    ], ncs, T0)
    assert not plan and not plan.waiting


def test_a_failed_check_without_impaired_since_is_due():
    # upstream reads the missing time as the zero time: long past the threshold
    plan = plan_instance_health([item("i-a", system=check("impaired"))], claims("a"), T0)
    assert [a.nodeclaim for a in plan.forceful] == ["a"] and plan.forceful[0].detail == "SystemStatus reachability failed"


@pytest.mark.parametrize("code", SCHEDULED_EVENT_CODES)
def test_each_scheduled_event_code_deletes_gracefully(code):
    plan = plan_instance_health([item("i-a", events=[event(code, "The instance is scheduled", T0 + 3 * 86400)])],
                                claims("a"), T0)
    (a,) = plan.graceful
    assert not plan.forceful and a.reason == SCHEDULED_CHANGE and not a.forceful
    assert [e.code for e in a.events] == [code] and a.deadline == T0 + 3 * 86400


def test_an_event_already_started_sets_no_deadline_and_unknown_codes_are_ignored():
    ncs = claims("a", "b")
    plan = plan_instance_health([item("i-a", events=[event("system-reboot", "", T0 - 60)]),
                                 item("i-b", events=[event("instance-hibernate", "", T0 + 60)])], ncs, T0)
    assert [(a.nodeclaim, a.deadline) for a in plan.graceful] == [("a", None)]


@pytest.mark.parametrize("description", ["[Completed] The instance is running on new hardware.",
                                         "[Canceled] The scheduled reboot was canceled.",
                                         " [Completed] reboot done"])
def test_completed_and_canceled_events_are_ignored(description):
    plan = plan_instance_health([item("i-a", events=[event("system-maintenance", description, T0 - 86400)])],
                                claims("a"), T0)
    assert not plan and not plan.waiting


def test_unknown_instances_are_ignored():
    plan = plan_instance_health([item("i-other", instance=check("impaired", T0 - 999),
                                      events=[event("instance-retirement")])], claims("a"), T0)
    assert not plan and not plan.waiting


def test_impaired_wins_over_an_event_and_a_young_impairment_does_not_hide_an_event():
    ncs = claims("a", "b")
    plan = plan_instance_health([
        item("i-a", instance=check("impaired", T0 - 500), events=[event("instance-stop", "", T0 + 600)]),
        item("i-b", instance=check("impaired", T0 - 30), events=[event("instance-stop", "", T0 + 600)]),
    ], ncs, T0)
    assert [a.nodeclaim for a in plan.forceful] == ["a"]
    assert [a.nodeclaim for a in plan.graceful] == ["b"] and not plan.waiting


def test_deleting_nodeclaims():
    stamped = {wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: builders.iso(T0 - 10)}
    later = {wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION: builders.iso(T0 + 86400)}
    ncs = {**claims("a", deleting=True), **claims("b", deleting=True, annotations=stamped),
           **claims("c", deleting=True, annotations=later), **claims("d", deleting=True)}
    plan = plan_instance_health([item("i-a", system=check("impaired", T0 - 300)),
                                 item("i-b", system=check("impaired", T0 - 300)),
                                 item("i-c", system=check("impaired", T0 - 300)),
                                 item("i-d", events=[event("system-reboot", "", T0 + 60)])], ncs, T0)
    # an impaired instance's drain is made forceful unless an earlier deadline is set; an event leaves it be
    assert [a.nodeclaim for a in plan.force_deleting] == ["a", "c"]
    assert not plan.forceful and not plan.graceful


def test_setting():
    assert Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c"}).instance_status_checks is True
    assert Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c",
                            "KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS": "false"}).instance_status_checks is False
    with pytest.raises(ValueError, match="KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS"):
        Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c", "KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS": "off"})


# -- the adapter -----------------------------------------------------------------------------------------------------

class FakeEC2:
    """Records the calls; pages of one item; an unknown id fails the call as EC2 does."""

    def __init__(self, known):
        self.known, self.calls = set(known), []

    def describe_instance_status(self, **params):
        self.calls.append(params)
        ids = params["InstanceIds"]
        unknown = [i for i in ids if i not in self.known]
        if unknown:
            from botocore.exceptions import ClientError
            raise ClientError({"Error": {"Code": "InvalidInstanceID.NotFound",
                                         "Message": f"The instance IDs '{', '.join(unknown)}' do not exist"}},
                              "DescribeInstanceStatus")
        start = int(params.get("NextToken") or 0)
        out = {"InstanceStatuses": [item(ids[start])] if start < len(ids) else []}
        if start + 1 < len(ids):
            out["NextToken"] = str(start + 1)
        return out


def test_adapter_chunks_pages_and_drops_unknown_ids():
    ids = [f"i-{n:05d}" for n in range(150)]
    ec2 = FakeEC2(ids[:-2])
    got = adapter.describe_instance_status(ec2, ids + [ids[0]])
    assert sorted(s["InstanceId"] for s in got) == ids[:-2]
    first = [c for c in ec2.calls if "NextToken" not in c]
    assert [len(c["InstanceIds"]) for c in first] == [100, 50, 48]   # the second chunk asked again without the two
    assert all(c["IncludeAllInstances"] is False for c in ec2.calls)


def test_adapter_denied():
    from botocore.exceptions import ClientError

    class Denied:
        def describe_instance_status(self, **_):
            raise ClientError({"Error": {"Code": "UnauthorizedOperation", "Message": "no"}}, "DescribeInstanceStatus")

    with pytest.raises(adapter.StatusCheckDenied):
        adapter.describe_instance_status(Denied(), ["i-1"])


# -- end to end: the lifecycle sweep in the World (moto + the local Kubernetes API) ----------------------------------

@pytest.fixture
def ec2_states(monkeypatch):
    """Impaired checks and scheduled events on moto's instances: {"impaired": {iid: (category, since)}, "events": {iid: [..]}}."""
    states = {"impaired": {}, "events": {}}
    base = Instance.instance_status.fget

    def status(category):
        def get(self):
            got = states["impaired"].get(self.id)
            if got and got[0] == category and self.state_code == 16:
                return check("impaired", got[1])
            return base(self)
        return property(get)

    monkeypatch.setattr(Instance, "instance_status", status("InstanceStatus"))
    monkeypatch.setattr(Instance, "system_status", status("SystemStatus"))
    monkeypatch.setattr(Instance, "events", property(lambda self: states["events"].get(self.id, [])), raising=False)
    return states


def settled(world, pods=1):
    world.provision(world.sqs_event(world.add_pods([make_pod(f"web-{i}") for i in range(pods)])))
    (inst,) = world.instances()
    (nc,) = world.store.list("NodeClaim")
    node = world.join(inst, ready=True)
    world.sweep()
    world.schedule()
    world.clock.advance(60)
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")
    return inst["InstanceId"], nc.name, node["metadata"]["name"]


def test_an_impaired_instance_is_deleted_forcefully(world, ec2_states):
    iid, name, node = settled(world)
    sim = Events(world.store)
    for _ in range(3):   # a settled cluster: the quiet shortcut skips the sweep, the checks still run
        world.clock.advance(60)
        assert sim.lifecycle(world.sweep())["disrupted"] == []
    assert SKIPPED in world.logs.getvalue() or CHECKED in world.logs.getvalue()
    ec2_states["impaired"][iid] = ("SystemStatus", world.clock.now() - 60)
    report = sim.lifecycle(world.sweep())
    assert report["disrupted"] == [] and world.store.get("NodeClaim", name).metadata.get("deletionTimestamp") is None
    world.clock.advance(61)
    report = sim.lifecycle(world.sweep())
    (d,) = report["disrupted"]
    assert d["nodeClaim"] == name and d["reason"] == INSTANCE_UNHEALTHY and d["instanceId"] == iid
    assert d["categories"] == ["SystemStatus"] and d["detail"] == "SystemStatus reachability failed for 2m1s"
    nc = world.store.get("NodeClaim", name)
    if nc is not None:   # forceful: deletion reason and termination timestamp now; the pod deleted, not evicted
        ann = nc.annotations
        assert ann[wk.DELETION_REASON_ANNOTATION].startswith("InstanceUnhealthy: SystemStatus reachability failed")
        assert to_epoch(ann[wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION]) == pytest.approx(world.clock.now(), abs=1)
    assert all(e["how"] != "eviction" for e in report["evicted"]) and report["evicted"]
    events = [e for e in world.server.store.list("events", "default") if e.get("reason") == INSTANCE_UNHEALTHY]
    assert [e["involvedObject"]["name"] for e in events] == [node]
    for _ in range(4):   # until it is gone: never disrupted again
        world.clock.advance(60)
        sim.lifecycle(world.sweep())
    assert world.store.get("NodeClaim", name) is None
    assert [e for e in sim.emitted if e[0] == "NodeClaimDisrupted"] == [
        ("NodeClaimDisrupted", f"nodeclaim/{name}", {k: d.get(k) for k in (
            "reason", "nodePool", "instanceType", "zone", "capacityType", "replacements", "savingsPerHour")})]
    assert any(e[0] == "NodeClaimDeleted" and e[1] == f"nodeclaim/{name}" for e in sim.emitted)


def test_a_scheduled_event_replaces_then_drains(world, ec2_states):
    iid, name, node = settled(world)
    start = world.clock.now() + 2 * 86400
    ec2_states["events"][iid] = [event("instance-retirement", "The instance is running on degraded hardware", start),
                                 event("system-reboot", "[Completed] done", world.clock.now() - 3600)]
    sim = Events(world.store)
    world.clock.advance(60)
    report = sim.lifecycle(world.sweep())
    (d,) = report["disrupted"]
    assert d["reason"] == SCHEDULED_CHANGE and d["events"] == ["instance-retirement"] and len(d["replacements"]) == 1
    nc = world.store.get("NodeClaim", name)
    assert nc.annotations[wk.DELETION_REASON_ANNOTATION].startswith("ScheduledChange: scheduled instance-retirement")
    assert to_epoch(nc.annotations[wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION]) == pytest.approx(start, abs=1)
    assert report["evicted"] == [] and [h["nodeClaim"] for h in report["held"]] == [name]   # waits for the replacement
    for _ in range(3):
        world.clock.advance(60)
        sim.lifecycle(world.sweep())
    assert sum(1 for e in sim.emitted if e[0] == "NodeClaimDisrupted") == 1


def test_switched_off(ec2_states, monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS", "false")   # read when the environment is built
    with World(scenario_manifests()) as world:
        iid, name, _node = settled(world)
        ec2_states["impaired"][iid] = ("InstanceStatus", world.clock.now() - 600)
        world.clock.advance(60)
        assert world.sweep()["disrupted"] == []
        assert world.store.get("NodeClaim", name).metadata.get("deletionTimestamp") is None
