"""The termination drain against the local Kubernetes API server and moto: each ``finalize`` is a fresh Terminator
(a new invocation) and the server's state is checked after every call."""

DISRUPTED_TOLERATION = {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}
FIN = ["example.com/hold"]   # a pod with a finalizer stays terminating after its eviction until released


def test_taint_and_label_then_drained_and_terminated(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.cloud.lag = 1                                 # EC2 reports the instance running once more after the call
    d.request(x)
    assert d.finalize(x) == "terminating"          # no blocker: drained, instance terminated in one call
    node = d.server.store.get("nodes", x["node"])
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in [
        {"key": t["key"], "effect": t["effect"]} for t in node["spec"]["taints"]]
    assert node["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"
    assert sorted(d.evictions()) == ["app-0", "app-1"] and d.names_on(x["node"]) == set()
    st = d.status(x)
    assert st["startedAt"] and st["drainedAt"] and st["instanceTerminatedAt"] and len(st["evicted"]) == 2
    assert d.cloud.terminated == [x["iid"]] and d.state(x["iid"]) in ("shutting-down", "terminated")
    assert d.finalize(x) == "deleted"
    assert d.w.store.get("NodeClaim", x["name"]) is None and d.server.store.get("nodes", x["node"]) is None
    assert d.cloud.terminated == [x["iid"]]       # TerminateInstances once, though it was still "running" after
    decisions = [k for k, _m, _f in d.decisions]
    assert decisions.count("evict") == 2 and decisions.count("terminate") == 1 and "taint" in decisions


def test_taint_is_not_repatched(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pod("held", x["node"], annotations={"karpenter.sh/do-not-disrupt": "true"})
    before = len(d.server.requests("PATCH", rf"/nodes/{x['node']}$"))    # registration, initialization
    d.request(x)
    for _ in range(3):
        assert d.finalize(x) == "draining"
    node_patches = d.server.requests("PATCH", rf"/nodes/{x['node']}$")[before:]
    assert len(node_patches) == 2                  # the taint once, the label once
    assert [k for k, _m, _f in d.decisions].count("taint") == 1


def test_groups_in_order_each_after_the_previous_is_gone(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    n = x["node"]
    d.server.store.patch("pods", "app-0", {"metadata": {"finalizers": FIN}}, namespace="default")
    d.pod("ds", n, owner="DaemonSet", finalizers=FIN)
    d.pod("crit", n, critical=True, finalizers=FIN)
    d.pod("crit-ds", n, owner="DaemonSet", critical=True, finalizers=FIN)
    d.request(x)

    # group 0: the normal pod is evicted; the DaemonSet and critical pods are not while it remains (terminating)
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0"] and d.terminating_on(n) == {"app-0"}
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0"]              # terminating is not gone: nothing more, nothing twice
    assert d.status(x)["group"] == 0
    d.release("app-0")
    # group 1: non-critical DaemonSet
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0", "ds"] and d.terminating_on(n) == {"ds"}
    d.release("ds")
    # group 2: critical
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0", "ds", "crit"]
    assert d.status(x)["group"] == 2 and d.status(x)["groupName"] == "critical"
    d.release("crit")
    # group 3: critical DaemonSet
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0", "ds", "crit", "crit-ds"]
    assert d.running() == {x["iid"]}               # not terminated while a pod is still there
    d.release("crit-ds")
    assert d.finalize(x) == "deleted"              # moto terminates at once
    assert d.running() == set()


def test_mirror_tolerating_and_finished_pods_are_skipped(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    n = x["node"]
    d.pod("mirror", n, owner="Node", annotations={"kubernetes.io/config.mirror": "abc"})
    d.pod("stays", n, tolerations=[DISRUPTED_TOLERATION])
    d.pod("stays-all", n, tolerations=[{"operator": "Exists"}])          # tolerates every taint
    d.pod("done", n, phase="Succeeded")
    d.pod("failed", n, owner="DaemonSet", phase="Failed")
    d.request(x)
    d.cloud.lag = 1
    assert d.finalize(x) == "terminating"          # drained at once: only app-0 needed to go
    assert d.evictions(ok_only=False) == ["app-0"] and d.pod_deletes() == []
    assert d.names_on(n) == {"mirror", "stays", "stays-all", "done", "failed"}
    assert d.finalize(x) == "deleted"


def test_pdb_blocks_until_the_termination_grace_period_then_the_pod_is_deleted(make_world):
    d = make_world(tgp="1h")
    x = d.node_with_pods(1)
    d.pod("guarded", x["node"], labels={"app": "guarded"}, grace=120)
    d.pdb("hold", "guarded", max_unavailable=0)
    d.request(x)
    for _ in range(5):
        assert d.finalize(x) == "draining"
        assert "guarded" in d.names_on(x["node"])
        d.w.clock.advance(600)                      # 50 minutes in all
    assert d.evictions() == ["app-0"]
    assert d.evictions(ok_only=False).count("guarded") == 5     # retried each call, never bypassed
    blocked = d.status(x)["blocked"]
    assert list(blocked.values()) == ["PDB default/hold (429)"]
    assert [k for k, _m, _f in d.decisions].count("evict-blocked") == 5
    assert d.running() == {x["iid"]}
    # the pod's delete time is the deadline (60 min) minus its 120 s: 58 min; the drain deletes it at its last look
    # before that (eviction.DELETE_LEAD, the sweep's period), so that it gets its whole grace period
    d.w.clock.advance(600 - 120 - 60 - 1)           # 56m59s: its delete time is more than a sweep away
    assert d.finalize(x) == "draining" and d.pod_deletes() == []
    d.w.clock.advance(2)                            # 57m01s: due before the next look: deleted, whatever the PDB says
    d.cloud.lag = 1
    assert d.finalize(x) == "terminating"
    assert d.pod_deletes() == ["guarded"] and "guarded" not in d.names_on(x["node"])
    assert list(d.status(x)["deleted"]) and d.status(x)["blocked"] == {}
    assert "delete-pod" in [k for k, _m, _f in d.decisions]
    assert d.finalize(x) == "deleted"
    assert d.running() == set() and d.cloud.terminated == [x["iid"]]


def test_without_termination_grace_period_a_pdb_blocks_forever(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pdb("hold", "app", max_unavailable=0)
    d.request(x)
    for _ in range(4):
        assert d.finalize(x) == "draining"
        d.w.clock.advance(24 * 3600)
    assert d.names_on(x["node"]) == {"app-0"} and d.pod_deletes() == [] and d.running() == {x["iid"]}


def test_do_not_disrupt_waits_for_the_deadline(make_world):
    d = make_world(tgp="10m")
    x = d.node_with_pods(1)
    d.pod("busy", x["node"], annotations={"karpenter.sh/do-not-disrupt": "true"})   # grace 30 s by default
    d.request(x)
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0"]
    assert list(d.status(x)["blocked"].values()) == ["do-not-disrupt"]
    d.w.clock.advance(8 * 60)
    assert d.finalize(x) == "draining" and d.evictions() == ["app-0"] and d.pod_deletes() == []
    d.w.clock.advance(31)                           # 8m31s: its delete time (deadline - 30 s) is before the next look
    assert d.finalize(x) == "deleted"
    assert d.pod_deletes() == ["busy"] and d.evictions() == ["app-0"]


def test_deadline_deletes_a_terminating_pod_never_twice(make_world):
    d = make_world(tgp="5m")
    x = d.node_with_pods(1)
    d.pod("slow", x["node"], finalizers=FIN, annotations={"karpenter.sh/do-not-disrupt": "true"})
    d.request(x)
    assert d.finalize(x) == "draining"
    d.w.clock.advance(5 * 60)
    assert d.finalize(x) == "draining"              # deleted; its finalizer keeps it terminating
    assert d.pod_deletes() == ["slow"] and d.terminating_on(x["node"]) == {"slow"}
    d.w.clock.advance(30)
    assert d.finalize(x) == "draining" and d.pod_deletes() == ["slow"]    # waited for, not deleted again
    d.w.clock.advance(60)                           # stuck terminating (> 1 min past its deletionTimestamp)
    assert d.finalize(x) == "deleted" and d.pod_deletes() == ["slow"]
    assert d.evictions() == ["app-0"] and d.running() == set()


def test_a_drain_resumes_across_invocations_and_evicts_nothing_twice(make_world):
    d = make_world()
    x = d.node_with_pods(3)
    # the first invocation dies on the second eviction (a 500 the client does not survive)
    d.server.add_fault(status=403, times=1, method="POST", path=r"/pods/app-1/eviction$")
    d.request(x)
    errors: list[str] = []
    assert d.finalize(x, errors) == "draining" and errors
    st = d.status(x)
    assert len(st["evicted"]) == 1 and st["startedAt"]
    started = st["startedAt"]
    d.w.clock.advance(60)
    d.cloud.lag = 1
    assert d.finalize(x) == "terminating"          # a fresh Terminator continues from the stored state
    assert sorted(d.evictions()) == ["app-0", "app-1", "app-2"]     # each exactly once
    st = d.status(x)
    assert st["startedAt"] == started and len(st["evicted"]) == 3
    assert d.finalize(x) == "deleted" and d.running() == set()


def test_a_pod_recorded_as_evicted_is_not_evicted_again(make_world):
    """The record is checked as well as the pod's deletionTimestamp (e.g. a stale read after the eviction)."""
    d = make_world()
    x = d.node_with_pods(1)
    d.pod("other", x["node"])
    uid = d.server.store.get("pods", "other", "default")["metadata"]["uid"]

    def mutate(obj):
        obj.status["termination"] = {"startedAt": "2026-01-01T00:00:00Z", "evicted": {uid: "2026-01-01T00:00:00Z"}}
        return obj

    d.request(x)
    d.w.store.update("NodeClaim", x["name"], mutate)
    assert d.finalize(x) == "draining"
    assert d.evictions() == ["app-0"] and "other" in d.names_on(x["node"])


def test_a_pod_gets_its_whole_grace_period_before_the_deadline_with_a_sweep_a_minute():
    """Karpenter deletes a pod at the node's deadline minus the pod's terminationGracePeriodSeconds so that it gets all
    of it.  Looked at once a minute, the drain deletes it at its last look before that time (at most a minute early),
    never after it (which left a 30 s pod about a second)."""
    from karpenter_lambda.disruption.eviction import DELETE_LEAD, next_step

    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "p",
                        "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
           "spec": {"terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}}
    deadline = 1000.0
    for now in (900.0, 900.0 + 10.0):   # delete time 970: more than a look away, then within one
        step = next_step([pod], now, deadline, lead=DELETE_LEAD)
        assert [p["metadata"]["name"] for p in step.delete] == ([] if now + DELETE_LEAD < 970 else ["p"])
    # and every look from when it is due to the deadline gives it at least its 30 s
    for now in range(int(970 - DELETE_LEAD), 971, 10):
        step = next_step([pod], float(now), deadline, lead=DELETE_LEAD)
        assert step.delete and deadline - now >= 30
