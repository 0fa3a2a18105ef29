"""The simulated kube-scheduler and the KWOK-like node helpers."""

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.sim.kubescheduler import pod_requests, schedule_pending
from karpenter_lambda.sim.nodes import make_node, remove_startup_taints, set_node_ready


def _node(store, name, zone="us-east-1a", cpu="2", mem="8Gi", ready=True, labels=None, taints=None):
    return store.create("nodes", make_node(name, f"aws:///{zone}/i-{name}", "m5.large", zone, {"cpu": cpu, "memory": mem, "pods": "10"}, labels=labels, taints=taints, ready=ready))


def _pod(store, name, cpu="500m", mem="1Gi", **spec):
    return store.create(
        "pods",
        {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": mem}}}], **spec}},
    )


def _cond(store, name):
    pod = store.get("pods", name, "default")
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_binds_where_it_fits_and_marks_the_rest(server):
    st = server.store
    _node(st, "a", cpu="2")
    _pod(st, "p1", cpu="1500m")
    _pod(st, "p2", cpu="1")  # only 500m left on a
    res = schedule_pending(server)
    assert res.bound == [("default/p1", "a")]
    assert res.unschedulable == {"default/p2": "0/1 nodes are available: 1 Insufficient cpu."}
    c = _cond(st, "p2")
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")
    p1 = st.get("pods", "p1", "default")
    assert p1["spec"]["nodeName"] == "a" and p1["status"]["phase"] == "Running"
    # unchanged situation: the status is not rewritten (the watcher would resend every write)
    rv = st.get("pods", "p2", "default")["metadata"]["resourceVersion"]
    schedule_pending(server)
    assert st.get("pods", "p2", "default")["metadata"]["resourceVersion"] == rv
    # a new node arrives: p2 binds
    _node(st, "b")
    assert schedule_pending(server).bound == [("default/p2", "b")]


def test_not_ready_taints_selectors_affinity_ports(server):
    st = server.store
    _node(st, "notready", ready=False)
    _node(st, "tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    _node(st, "arm", labels={"kubernetes.io/arch": "arm64"})
    _node(st, "zb", zone="us-east-1b")
    _pod(st, "needs-arm", nodeSelector={"kubernetes.io/arch": "arm64"})
    _pod(st, "tolerates", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
         affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["tainted"]}]}]}}})
    _pod(st, "zone-b", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]}]},
    ]}}})
    port = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    st.create("pods", {"metadata": {"name": "hp1", "namespace": "default"}, "spec": {**port, "nodeSelector": {"kubernetes.io/hostname": "zb"}}})
    st.create("pods", {"metadata": {"name": "hp2", "namespace": "default"}, "spec": {**port, "nodeSelector": {"kubernetes.io/hostname": "zb"}}})
    _pod(st, "nowhere", nodeSelector={"kubernetes.io/arch": "s390x"})
    res = schedule_pending(server)
    bound = dict(res.bound)
    assert bound["default/needs-arm"] == "arm"
    assert bound["default/tolerates"] == "tainted"
    assert bound["default/zone-b"] == "zb"
    assert bound["default/hp1"] == "zb" and "default/hp2" in res.unschedulable
    assert "didn't have free ports" in res.unschedulable["default/hp2"]
    msg = res.unschedulable["default/nowhere"]
    assert msg.startswith("0/4 nodes are available:") and "1 node(s) were not ready" in msg and "node affinity/selector" in msg


def test_node_helpers_ready_and_startup_taints(server):
    st = server.store
    n = make_node("n", "aws:///us-east-1a/i-1", "c6g.large", "us-east-1a", {"cpu": 2000, "memory": 4 * 2**30}, taints=[{"key": "startup", "effect": "NoSchedule"}])
    assert n["status"]["capacity"] == {"cpu": "2", "memory": "4Gi", "pods": "110"}
    assert n["metadata"]["labels"]["topology.kubernetes.io/region"] == "us-east-1"
    assert {t["key"] for t in n["spec"]["taints"]} == {"startup", "node.kubernetes.io/not-ready"}
    st.create("nodes", n)
    _pod(st, "p")
    assert schedule_pending(server).bound == []
    set_node_ready(server, "n")
    assert [t["key"] for t in st.get("nodes", "n")["spec"]["taints"]] == ["startup"]
    assert schedule_pending(server).bound == []  # startup taint still there
    remove_startup_taints(server, "n", [{"key": "startup", "effect": "NoSchedule"}])
    assert "taints" not in st.get("nodes", "n")["spec"]
    assert schedule_pending(server).bound == [("default/p", "n")]
    with pytest.raises(ValueError, match="effect"):
        make_node("x", "p", "t", "us-east-1a", {}, taints=[{"key": "k", "effect": "Bad"}])


def test_pod_requests_init_sidecars_overhead():
    pod = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}, {"resources": {"limits": {"cpu": "500m"}}}],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
            {"resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }}
    # containers 1.5 + sidecar 0.25 = 1.75; init peak 0.25 + 3 = 3.25 -> 3.25 + overhead 0.1
    assert pod_requests(pod) == {"cpu": 3350, "memory": 2**30, "pods": 1}


def test_works_over_http_with_the_kube_client(server):
    st = server.store
    _node(st, "a")
    _pod(st, "p", cpu="3")
    _pod(st, "q")
    kc = KubeClient.from_host(server.url)
    res = schedule_pending(kc)
    assert res.bound == [("default/q", "a")]
    assert _cond(st, "p")["reason"] == "Unschedulable"


def _lpod(store, name, labels, ns="default", cpu="100m", **spec):
    return store.create("pods", {"metadata": {"name": name, "namespace": ns, "labels": labels},
                                 "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
                                          **spec}}, ns)


ANTI_HOST = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}


def test_required_pod_anti_affinity_one_per_node(server):
    st = server.store
    _node(st, "n1")
    _node(st, "n2")
    for i in range(4):
        _lpod(st, f"a{i}", {"app": "a"}, affinity=ANTI_HOST)
    res = schedule_pending(server)
    assert sorted(n for _, n in res.bound) == ["n1", "n2"]  # room for all four, but one per host
    assert len(res.unschedulable) == 2
    assert all("didn't match pod anti-affinity rules" in m for m in res.unschedulable.values())
    # symmetry: a pod without anti-affinity of its own is kept away from a bound pod whose anti-affinity it matches
    _node(st, "n3")
    _lpod(st, "x", {"app": "a"})
    res = schedule_pending(server)
    bound = dict(res.bound)
    assert bound.get("default/x") == "n3" or "default/x" not in bound
    assert all(node == "n3" for node in bound.values())


def test_required_pod_affinity_follows_its_group_and_the_first_goes_anywhere(server):
    st = server.store
    _node(st, "n1", zone="us-east-1a")
    _node(st, "n2", zone="us-east-1b")
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}
    _lpod(st, "cache-0", {"app": "cache"}, nodeSelector={"topology.kubernetes.io/zone": "us-east-1b"})
    _lpod(st, "follower", {"app": "web"}, affinity=aff)
    res = schedule_pending(server)
    assert dict(res.bound)["default/follower"] == "n2"
    # no matching pod anywhere and the pod does not match its own term: unschedulable
    _lpod(st, "orphan", {"app": "web"}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    res = schedule_pending(server)
    assert "didn't match pod affinity rules" in res.unschedulable["default/orphan"]
    # a self-matching first pod may go anywhere
    _lpod(st, "db-0", {"app": "db"}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    res = schedule_pending(server)
    bound = dict(res.bound)
    assert "default/db-0" in bound and bound.get("default/orphan") == bound["default/db-0"]


def test_topology_spread_do_not_schedule_max_skew(server):
    st = server.store
    _node(st, "a1", zone="us-east-1a", cpu="8")
    _node(st, "b1", zone="us-east-1b", cpu="8")
    spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    # three web pods already in zone a: the first new ones can only go to b, and the skew never exceeds 1
    for i in range(3):
        _lpod(st, f"old{i}", {"app": "web"}, nodeName="a1")
    for i in range(4):
        _lpod(st, f"web{i}", {"app": "web"}, topologySpreadConstraints=spread)
    res = schedule_pending(server)
    assert [n for _, n in res.bound][:3] == ["b1", "b1", "b1"] and len(res.bound) == 4

    def per_zone():
        out = {"a1": 0, "b1": 0}
        for p in st.list("pods"):
            if (p["metadata"].get("labels") or {}).get("app") == "web" and p["spec"].get("nodeName"):
                out[p["spec"]["nodeName"]] += 1
        return out

    assert abs(per_zone()["a1"] - per_zone()["b1"]) <= 1
    # with zone b cordoned off by a nodeSelector, a pod that would make the skew 2 stays pending
    counts = per_zone()
    fuller = "us-east-1a" if counts["a1"] > counts["b1"] else "us-east-1b"
    if counts["a1"] == counts["b1"]:
        _lpod(st, "web-even", {"app": "web"}, nodeSelector={"topology.kubernetes.io/zone": fuller},
              topologySpreadConstraints=spread)
        assert schedule_pending(server).bound == [("default/web-even", "a1" if fuller == "us-east-1a" else "b1")]
    _lpod(st, "web-skew", {"app": "web"}, nodeSelector={"topology.kubernetes.io/zone": fuller},
          topologySpreadConstraints=[{**spread[0], "nodeAffinityPolicy": "Ignore"}])
    res = schedule_pending(server)
    assert "didn't match pod topology spread constraints" in res.unschedulable["default/web-skew"]
    # ScheduleAnyway is only a preference: never a filter
    for i in range(3):
        _lpod(st, f"any{i}", {"app": "web"}, nodeSelector={"topology.kubernetes.io/zone": "us-east-1a"},
              topologySpreadConstraints=[{**spread[0], "whenUnsatisfiable": "ScheduleAnyway"}])
    res = schedule_pending(server)
    assert {n for _, n in res.bound} == {"a1"} and len(res.bound) == 3
    # a node without the topology label is not a candidate
    _node(st, "bare", cpu="8", labels={})
    st.patch("nodes", "bare", {"metadata": {"labels": {"topology.kubernetes.io/zone": None}}})
    _lpod(st, "web-z", {"app": "web"}, nodeSelector={"kubernetes.io/hostname": "bare"}, topologySpreadConstraints=spread)
    res = schedule_pending(server)
    assert "missing required label" in res.unschedulable["default/web-z"]
