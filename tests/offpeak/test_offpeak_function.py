"""The off-peak function through its real handler: moto + the local Kubernetes API + a virtual clock.

Times: Europe/Berlin is UTC+1 in winter (CET) and UTC+2 in summer (CEST); "0 20 * * *" for 12h is 19:00Z -> 07:00Z
in winter."""

from __future__ import annotations

import pytest

from .offpeak_world import NODEPOOL, OffPeakWorld, deployment, schedule

ORIGINAL = "karpenter-lambda.io/offpeak-original-replicas"
KEDA = "autoscaling.keda.sh/paused-replicas"


def _world(body=None, start="2027-01-12T18:00:00Z", **kw):
    text = NODEPOOL + "---" + (schedule(body, **kw) if body is not None else schedule(**kw))
    return OffPeakWorld(text, start)


def test_window_scales_selected_workloads_and_restores_the_exact_counts():
    with _world() as o:
        for name, n in (("a", 3), ("b", 5), ("c", 1)):
            o.create(deployment(name, replicas=n))
        o.create(deployment("db", replicas=2, kind="StatefulSet"))
        o.create(deployment("p", namespace="prod", replicas=4))
        before = o.run("2027-01-12T18:59:00Z")                      # 19:59 in Berlin: not yet
        assert before["scaled"] == [] and o.replicas("a") == 3
        start = o.run("2027-01-12T19:00:00Z")                       # 20:00 Berlin: the window starts
        assert start["started"] == ["nights"]
        assert {s["object"]: (s["from"], s["to"]) for s in start["scaled"]} == {
            "Deployment/dev/a": (3, 0), "Deployment/dev/b": (5, 0), "Deployment/dev/c": (1, 0),
            "StatefulSet/dev/db": (2, 0)}
        for name in ("a", "b", "c"):
            assert o.replicas(name) == 0
        assert o.replicas("db", kind="StatefulSet") == 0
        assert o.replicas("p", namespace="prod") == 4               # not selected
        recs = o.records()
        assert recs["Deployment/dev/b"]["originalReplicas"] == 5
        assert recs["StatefulSet/dev/db"]["originalReplicas"] == 2
        assert o.get("deployments", "b", "dev")["metadata"]["annotations"][ORIGINAL] == "5"
        # a second invocation inside the window changes nothing
        writes = o.writes()
        again = o.run("2027-01-13T01:00:00Z")
        assert again["scaled"] == [] and again["started"] == [] and o.writes() == writes
        end = o.run("2027-01-13T07:00:00Z")                         # 08:00 Berlin: restored
        assert end["ended"] == ["nights"]
        assert {s["object"]: (s["from"], s["to"], s["action"]) for s in end["scaled"]} == {
            "Deployment/dev/a": (0, 3, "restore"), "Deployment/dev/b": (0, 5, "restore"),
            "Deployment/dev/c": (0, 1, "restore"), "StatefulSet/dev/db": (0, 2, "restore")}
        assert [o.replicas(n) for n in ("a", "b", "c")] == [3, 5, 1]
        assert o.replicas("db", kind="StatefulSet") == 2
        assert o.records() == {}
        assert ORIGINAL not in (o.get("deployments", "b", "dev")["metadata"].get("annotations") or {})
        # and one after it changes nothing either
        writes = o.writes()
        after = o.run("2027-01-13T07:30:00Z")
        assert after["scaled"] == [] and after["ended"] == [] and o.writes() == writes


def test_hand_scaled_created_and_deleted_workloads_mid_window():
    with _world() as o:
        o.create(deployment("web", replicas=4))
        o.create(deployment("gone", replicas=2))
        o.run("2027-01-12T19:00:00Z")
        assert o.replicas("web") == 0
        o.at("2027-01-12T21:00:00Z")
        o.set_replicas("web", 7)                                    # someone scales it by hand at night
        o.server.store.delete("deployments", "gone", "dev")
        o.create(deployment("late", replicas=3))                    # created during the window
        mid = o.run("2027-01-12T23:00:00Z")
        assert {s["object"]: (s["from"], s["to"], s["action"]) for s in mid["scaled"]} == {
            "Deployment/dev/web": (7, 0, "rescale")}
        assert o.replicas("web") == 0 and o.replicas("late") == 3   # the new one is left alone
        assert "Deployment/dev/gone" not in o.records()             # the deleted one is forgotten
        assert any(s["object"] == "Deployment/dev/late" and "left alone" in s["reason"] for s in mid["skipped"])
        assert o.records()["Deployment/dev/web"]["originalReplicas"] == 4
        end = o.run("2027-01-13T07:00:00Z")
        assert o.replicas("web") == 4                               # the recorded count, not the hand-set 7
        assert o.replicas("late") == 3
        assert {s["object"] for s in end["scaled"]} == {"Deployment/dev/web"}
        assert o.records() == {}


def test_a_workload_deleted_and_recreated_is_not_restored_from_the_old_record():
    with _world() as o:
        o.create(deployment("web", replicas=4))
        o.run("2027-01-12T19:00:00Z")
        o.at("2027-01-12T20:00:00Z")
        o.server.store.delete("deployments", "web", "dev")
        o.create(deployment("web", replicas=2))                     # another object with the same name
        o.run("2027-01-12T23:00:00Z")
        assert o.replicas("web") == 2 and o.records() == {}
        o.run("2027-01-13T07:00:00Z")
        assert o.replicas("web") == 2


@pytest.mark.parametrize("night,before,start,last_held,end,hours", [
    # spring forward (2027-03-28 02:00 CET -> 03:00 CEST): 20:00 CET -> 08:00 CEST is 11 hours
    ("2027-03-27", "2027-03-27T18:59:00Z", "2027-03-27T19:00:00Z", "2027-03-28T05:59:00Z", "2027-03-28T06:00:00Z", 11),
    # fall back (2027-10-31 03:00 CEST -> 02:00 CET): 20:00 CEST -> 08:00 CET is 13 hours
    ("2027-10-30", "2027-10-30T17:59:00Z", "2027-10-30T18:00:00Z", "2027-10-31T06:59:00Z", "2027-10-31T07:00:00Z", 13),
])
def test_daylight_saving_change_keeps_the_wall_clock_window(night, before, start, last_held, end, hours):
    from datetime import datetime

    with _world(start=f"{night}T12:00:00Z") as o:
        o.create(deployment("web", replicas=3))
        o.run(before)
        assert o.replicas("web") == 3                               # a minute before 20:00 local
        r = o.run(start)
        assert r["started"] == ["nights"] and o.replicas("web") == 0
        window = r["schedules"][0]["window"]
        assert window["startLocal"].startswith(f"{night}T20:00") and window["endLocal"][11:16] == "08:00"
        length = datetime.fromisoformat(window["end"].replace("Z", "+00:00")) - datetime.fromisoformat(
            window["start"].replace("Z", "+00:00"))
        assert length.total_seconds() == hours * 3600
        o.run(last_held)
        assert o.replicas("web") == 0
        o.run(end)
        assert o.replicas("web") == 3


def test_nodepool_overrides_applied_and_restored():
    body = """
  nodePools:
    - name: default
      limits: {cpu: "16"}
      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
"""
    with _world(body) as o:
        original = o.store.get("NodePool", "default").spec
        o.run("2027-01-12T19:00:00Z")
        during = o.store.get("NodePool", "default").spec
        assert during["limits"] == {"cpu": "16"}
        assert during["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
        assert during["disruption"]["consolidateAfter"] == "0s"
        assert during["disruption"].get("budgets") == original["disruption"].get("budgets")
        assert during["template"] == original["template"]
        rec = o.records()["NodePool/default"]
        assert rec["original"]["limits"] == {"cpu": "1000"}
        o.run("2027-01-13T07:00:00Z")
        assert o.store.get("NodePool", "default").spec == original
        assert o.records() == {}


def test_hpa_and_keda_managed_workloads():
    body = """
  workloads:
    - namespaces: [dev]
      replicas: 0
    - namespaces: [staging]
      replicas: 1
"""
    with _world(body) as o:
        o.create(deployment("web", replicas=3))
        o.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                  "metadata": {"name": "web", "namespace": "dev"},
                  "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                           "minReplicas": 2, "maxReplicas": 10}})
        o.create(deployment("api", namespace="staging", replicas=4))
        o.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                  "metadata": {"name": "api", "namespace": "staging"},
                  "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
                           "minReplicas": 2, "maxReplicas": 8}})
        o.create(deployment("worker", replicas=5))
        o.create({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                  "metadata": {"name": "worker", "namespace": "dev"},
                  "spec": {"scaleTargetRef": {"name": "worker"}, "minReplicaCount": 1, "maxReplicaCount": 20}})
        o.create(deployment("queue", replicas=2))
        o.create({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                  "metadata": {"name": "queue", "namespace": "dev", "annotations": {KEDA: "2"}},
                  "spec": {"scaleTargetRef": {"name": "queue"}}})
        o.run("2027-01-12T19:00:00Z")
        assert o.replicas("web") == 0
        hpa = o.get("horizontalpodautoscalers", "web", "dev")["spec"]
        assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 10)      # target 0: the HPA is idle by itself
        api = o.get("horizontalpodautoscalers", "api", "staging")["spec"]
        assert o.replicas("api", "staging") == 1 and (api["minReplicas"], api["maxReplicas"]) == (1, 1)
        assert o.get("scaledobjects", "worker", "dev")["metadata"]["annotations"][KEDA] == "0"
        assert o.get("scaledobjects", "queue", "dev")["metadata"]["annotations"][KEDA] == "0"
        assert o.replicas("worker") == 0
        o.run("2027-01-13T07:00:00Z")
        assert o.replicas("web") == 3 and o.replicas("api", "staging") == 4 and o.replicas("worker") == 5
        api = o.get("horizontalpodautoscalers", "api", "staging")["spec"]
        assert (api["minReplicas"], api["maxReplicas"]) == (2, 8)
        assert KEDA not in (o.get("scaledobjects", "worker", "dev")["metadata"].get("annotations") or {})
        assert o.get("scaledobjects", "queue", "dev")["metadata"]["annotations"][KEDA] == "2"


def test_overlapping_schedules_lowest_replicas_wins_and_the_original_is_kept():
    body_a = """
  workloads:
    - namespaces: [dev]
      replicas: 2
"""
    body_b = """
  workloads:
    - namespaces: [dev]
      selector: {matchLabels: {tier: web}}
      replicas: 1
"""
    text = NODEPOOL + "---" + schedule(body_a, name="evenings", cron="0 18 * * *", duration="4h") + "---" + \
        schedule(body_b, name="nights", cron="0 20 * * *", duration="12h")
    with OffPeakWorld(text, "2027-01-12T16:00:00Z") as o:
        o.create(deployment("web", replicas=6, labels={"tier": "web"}))
        o.run("2027-01-12T17:00:00Z")                               # 18:00 Berlin: evenings holds it at 2
        assert o.replicas("web") == 2
        o.run("2027-01-12T19:00:00Z")                               # 20:00: both; the lowest (1) wins
        assert o.replicas("web") == 1
        assert sorted(o.records()["Deployment/dev/web"]["holders"]) == ["OffPeakSchedule/evenings",
                                                                        "OffPeakSchedule/nights"]
        o.run("2027-01-12T21:00:00Z")                               # 22:00: evenings over, nights still 1
        assert o.replicas("web") == 1
        o.run("2027-01-13T07:00:00Z")
        assert o.replicas("web") == 6


def test_kube_downscaler_annotations_are_honoured():
    with _world(body="""
  workloads:
    - namespaces: [nothing-here]
      replicas: 0
""", start="2027-01-12T12:00:00Z") as o:                             # a Tuesday
        o.create(deployment("shop", replicas=3, annotations={
            "downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin"}))
        o.create(deployment("batch", replicas=4, annotations={
            "downscaler/downtime": "Mon-Fri 22:00-23:00 Europe/Berlin", "downscaler/downtime-replicas": "1"}))
        o.create(deployment("pinned", replicas=2, annotations={
            "downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin", "downscaler/exclude": "true"}))
        o.create(deployment("small", replicas=1, annotations={
            "downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin", "downscaler/downtime-replicas": "2"}))
        o.create(deployment("legacy", replicas=0, annotations={     # kube-downscaler scaled it down before the switch
            "downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin", "downscaler/original-replicas": "5"}))
        ns = o.get("namespaces", "staging")
        o.server.store.patch("namespaces", "staging", {"metadata": {"annotations": {
            "downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin"}}})
        assert ns is not None
        o.create(deployment("api", namespace="staging", replicas=2))
        o.run("2027-01-12T12:00:00Z")                               # 13:00 Berlin: up
        assert (o.replicas("shop"), o.replicas("batch"), o.replicas("api", "staging")) == (3, 4, 2)
        assert o.replicas("legacy") == 5                            # kube-downscaler's record restored
        assert "downscaler/original-replicas" not in o.get("deployments", "legacy", "dev")["metadata"]["annotations"]
        o.run("2027-01-12T19:45:00Z")                               # 20:45 Berlin: outside uptime
        assert o.replicas("shop") == 0 and o.replicas("api", "staging") == 0 and o.replicas("pinned") == 2
        assert o.replicas("batch") == 4
        assert o.replicas("small") == 1                             # never scaled up to downtime-replicas
        assert o.replicas("legacy") == 0
        o.run("2027-01-12T21:15:00Z")                               # 22:15: batch's downtime
        assert o.replicas("batch") == 1
        o.run("2027-01-13T06:45:00Z")                               # 07:45 Wednesday: everything back
        assert (o.replicas("shop"), o.replicas("batch"), o.replicas("api", "staging"), o.replicas("pinned")) == (3, 4, 2, 2)
        assert (o.replicas("small"), o.replicas("legacy")) == (1, 5)
        assert o.records() == {}


def test_a_failing_workload_fails_alone_and_is_retried():
    with _world() as o:
        o.create(deployment("a", replicas=3))
        o.create(deployment("b", replicas=2))
        o.server.add_fault(status=403, times=10, method="PATCH", path=r"/deployments/a/scale")
        r = o.run("2027-01-12T19:00:00Z")
        assert any(f["object"].endswith("dev/a") for f in r["failed"])
        assert o.replicas("b") == 0 and o.replicas("a") == 3
        assert o.records()["Deployment/dev/a"]["originalReplicas"] == 3  # recorded: nothing is lost
        o.server.clear_faults()
        o.run("2027-01-12T19:05:00Z")
        assert o.replicas("a") == 0
        o.run("2027-01-13T07:00:00Z")
        assert (o.replicas("a"), o.replicas("b")) == (3, 2)


def _receive_all(o) -> dict:
    """The pod queue's messages as a Lambda SQS event (whatever sent them)."""
    from karpenter_lambda.sim.simulator import _sqs_record

    w = o.w
    msgs = []
    while True:
        got = w.sqs.receive_message(QueueUrl=w.account.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=3600,
                                    AttributeNames=["All"]).get("Messages", [])
        if not got:
            break
        msgs.extend(got)
    return {"Records": [_sqs_record(m, w.account.queue_url, w.region) for m in msgs]}


def test_a_nodepool_drained_to_zero_with_an_unselected_pod_comes_back_without_the_watcher():
    from karpenter_lambda.sim.workloads import WorkloadController

    body = """
  nodePools:
    - name: default
      drain: true
"""
    with _world(body, start="2027-01-12T17:00:00Z") as o:
        w = o.w
        wc = WorkloadController(o.server)
        wc.add(deployment("other", namespace="prod", replicas=2))   # selected by nothing
        wc.reconcile()
        pending = [p for p in o.server.store.list("pods", namespace="prod")]
        assert len(pending) == 2
        w.provision(w.sqs_event(pending))
        w.join_all(ready=True)
        w.sweep()
        w.schedule()
        assert all((p.get("spec") or {}).get("nodeName") for p in o.server.store.list("pods", namespace="prod"))
        claims = {nc.name for nc in o.store.list("NodeClaim")}
        assert claims
        start = o.run("2027-01-12T19:00:00Z")
        assert set(start["drained"]) == claims
        limits = o.store.get("NodePool", "default").spec["limits"]
        assert limits == {"cpu": "0", "memory": "0"}
        for _ in range(6):                                          # the termination flow drains and deletes
            w.clock.advance(60)
            w.sweep()
            wc.reconcile()                                          # the ReplicaSet brings the evicted pods back
            w.schedule()
        assert o.store.list("NodeClaim") == []
        assert not w.instances()
        night = [p for p in o.server.store.list("pods", namespace="prod")]
        assert len(night) == 2 and not any((p.get("spec") or {}).get("nodeName") for p in night)
        # at night the pods stay pending: the NodePool is held at zero
        w.provision(w.sqs_event(night))
        assert not w.instances()
        _receive_all(o)                                             # (drop those night-time messages)
        # the morning: no watcher runs; the function hands the pending pods to provisioning itself
        end = o.run("2027-01-13T07:00:00Z")
        assert end["ended"] == ["nights"] and end["handedOff"] == 2
        assert o.store.get("NodePool", "default").spec["limits"] == {"cpu": "1000"}
        event = _receive_all(o)
        assert len(event["Records"]) == 2
        w.provision(event)
        assert w.instances(), "the restored NodePool launched a node for the pods the function handed off"
        w.join_all(ready=True)
        w.sweep()
        w.schedule()
        assert all((p.get("spec") or {}).get("nodeName") for p in o.server.store.list("pods", namespace="prod"))


def test_deleting_a_schedule_mid_window_restores_what_it_held():
    with _world() as o:
        o.create(deployment("web", replicas=4))
        o.run("2027-01-12T19:00:00Z")
        assert o.replicas("web") == 0
        o.store.delete("OffPeakSchedule", "nights")
        r = o.run("2027-01-12T21:00:00Z")
        assert [(s["object"], s["action"], s["to"]) for s in r["scaled"]] == [("Deployment/dev/web", "restore", 4)]
        assert o.replicas("web") == 4 and o.records() == {}
