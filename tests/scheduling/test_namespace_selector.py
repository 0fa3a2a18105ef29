"""A pod (anti-)affinity term's ``namespaceSelector``: the namespaces whose labels it selects, with those listed in
``namespaces`` (Karpenter's ``buildNamespaceList``, topology.go); ``{}`` selects every namespace; every namespace
carries ``kubernetes.io/metadata.name``.  The solver, ``scheduling_input`` on a snapshot, ``plan`` and the
simulated kube-scheduler."""

from __future__ import annotations

import json

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.snapshot import ClusterSnapshot
from karpenter_lambda.scheduling import ExistingNode, solve
from karpenter_lambda.scheduling import predicates as P
from karpenter_lambda.scheduling.inputs import scheduling_input

from .helpers import GI, node_of, pod, run

NAMESPACES = {"a": {"team": "a"}, "b": {}, "c": {"team": "c"}}
TEAM_A = {"matchLabels": {"team": "a"}}


def _term(selector=TEAM_A, **extra):
    return {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "x"}}, "namespaceSelector": selector,
            **extra}


def _affinity(kind="podAffinity", **term):
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [_term(**term)]}}


def test_term_namespaces_lists_the_selected_and_the_listed():
    ns = P.NamespaceLabels(NAMESPACES)
    assert P.term_namespaces({"namespaceSelector": TEAM_A}, "b", namespaces=ns) == {"a"}
    assert P.term_namespaces({"namespaceSelector": TEAM_A, "namespaces": ["c"]}, "b", namespaces=ns) == {"a", "c"}
    assert P.term_namespaces({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}},
                             "b", namespaces=NAMESPACES) == {"a", "c"}     # a plain dict is taken too
    assert P.term_namespaces({"namespaceSelector": {"matchLabels": {"team": "z"}}}, "b", namespaces=ns) == frozenset()
    # the API server's automatic label, on every namespace
    by_name = {"matchLabels": {P.NAMESPACE_NAME_LABEL: "b"}}
    assert P.term_namespaces({"namespaceSelector": by_name}, "a", namespaces=ns) == {"b"}
    # {} selects every namespace; no selector: the listed namespaces, else the owner's
    assert P.term_namespaces({"namespaceSelector": {}}, "b", namespaces=ns) is None
    assert P.term_namespaces({"namespaces": ["c"]}, "b", namespaces=ns) == {"c"}
    assert P.term_namespaces({}, "b", namespaces=ns) == {"b"}
    # the labels not known: as before (ignored by the solver, every namespace for the kube-scheduler's view)
    assert P.term_namespaces({"namespaceSelector": TEAM_A}, "b") == {"b"}
    assert P.term_namespaces({"namespaceSelector": TEAM_A}, "b", any_selector_is_all=True) is None


def test_affinity_term_matches_with_the_namespaces_labels():
    x_in = {ns: pod(f"x-{ns}", ns=ns, labels={"app": "x"}) for ns in NAMESPACES}
    ns = P.NamespaceLabels(NAMESPACES)
    assert [n for n, q in x_in.items() if P.affinity_term_matches(_term(), "b", q, ns)] == ["a"]
    assert [n for n, q in x_in.items() if P.affinity_term_matches(_term(), "b", q)] == ["a", "b", "c"]


def test_required_affinity_through_a_namespace_selector_co_locates():
    a1 = pod("a1", ns="a", labels={"app": "x"})
    b1 = pod("b1", ns="b", labels={"app": "y"}, affinity=_affinity())
    res = run([a1, b1], namespaces=NAMESPACES)
    assert res.unschedulable == []
    assert node_of(res, "a/a1") is node_of(res, "b/b1") is not None
    # the labels not known: the selector is ignored (b1's own namespace has no app=x pod)
    res = run([a1, b1])
    assert [u.pod for u in res.unschedulable] == ["b/b1"]


def test_required_anti_affinity_through_a_namespace_selector_separates():
    a1 = pod("a1", cpu="100m", memory="100Mi", ns="a", labels={"app": "x"})
    c1 = pod("c1", cpu="100m", memory="100Mi", ns="b", labels={"app": "x"})
    b1 = pod("b1", cpu="100m", memory="100Mi", ns="b", labels={"app": "y"},
             affinity=_affinity("podAntiAffinity"))
    res = run([a1, b1], namespaces=NAMESPACES)
    assert res.unschedulable == [] and node_of(res, "a/a1") is not node_of(res, "b/b1")
    # an app=x pod in a namespace the selector does not select does not count
    res = run([c1, b1], namespaces=NAMESPACES)
    assert res.unschedulable == [] and node_of(res, "b/c1") is node_of(res, "b/b1")


def _existing(*pods_on):
    return ExistingNode(name="n1", labels={L.HOSTNAME: "n1", L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand"},
                        allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 20}, pods=list(pods_on))


def test_anti_affinity_through_a_namespace_selector_on_an_existing_node():
    a1 = pod("a1", cpu="100m", memory="100Mi", ns="a", labels={"app": "x"}, nodeName="n1")
    b1 = pod("b1", cpu="100m", memory="100Mi", ns="b", labels={"app": "y"}, affinity=_affinity("podAntiAffinity"))
    res = run([b1], existing_nodes=[_existing(a1)], namespaces=NAMESPACES)
    assert res.existing.get("n1", []) == [] and node_of(res, "b/b1") is not None
    # the existing pod's own anti-affinity, through its selector, keeps b1 (app=x, namespace b) off too
    guard = pod("g", cpu="100m", memory="100Mi", ns="a", labels={"app": "g"}, nodeName="n1",
                affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    _term({"matchLabels": {P.NAMESPACE_NAME_LABEL: "b"}})]}})
    x = pod("bx", cpu="100m", memory="100Mi", ns="b", labels={"app": "x"})
    res = run([x], existing_nodes=[_existing(guard)], namespaces=NAMESPACES)
    assert res.existing.get("n1", []) == [] and node_of(res, "b/bx") is not None
    res = run([x], existing_nodes=[_existing(guard)])      # labels not known: the selector is ignored
    assert res.existing.get("n1") == ["b/bx"]


def test_scheduling_input_reads_the_snapshot_namespaces():
    from builders import nodepool, nodeclass
    from builders import _types as types

    a1 = pod("a1", ns="a", labels={"app": "x"})
    b1 = pod("b1", ns="b", labels={"app": "y"}, affinity=_affinity())
    ns_a = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"team": "a"}}}
    snap = ClusterSnapshot(now=0.0, nodepools={"default": nodepool()}, nodeclasses={"default": nodeclass()},
                           pods=[a1, b1], namespaces=[ns_a])
    snap.instance_types = {"default": types()}
    inp, _ = scheduling_input(snap, [a1, b1])
    assert inp.namespaces == {"a": {"team": "a"}, "b": {}}    # b: a pod's namespace without a Namespace object
    res = solve(inp)
    assert res.unschedulable == [] and node_of(res, "a/a1") is node_of(res, "b/b1")


def test_the_simulated_kube_scheduler_reads_the_namespaces_labels(kube_api_server):
    from karpenter_lambda.sim.kubescheduler import schedule_pending
    from karpenter_lambda.sim.nodes import join_node, make_node

    store = kube_api_server.store
    for name, labels in NAMESPACES.items():
        store.create("namespaces", {"metadata": {"name": name, "labels": labels}})
    join_node(store, make_node("n1", "aws:///us-east-1a/i-n1", "m5.large", "us-east-1a",
                               {"cpu": "4", "memory": "16Gi", "pods": "20"}, ready=True))
    ctr = [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]
    store.create("pods", {"metadata": {"name": "cx", "namespace": "c", "labels": {"app": "x"}},
                          "spec": {"containers": ctr, "nodeName": "n1"}})
    store.create("pods", {"metadata": {"name": "b1", "namespace": "b", "labels": {"app": "y"}},
                          "spec": {"containers": ctr, "affinity": _affinity("podAntiAffinity")}})
    # cx (namespace c, not team=a) does not count: b1 goes on n1, its only node
    assert schedule_pending(kube_api_server).bound == [("b/b1", "n1")]


def test_plan_reads_namespace_manifests(capsys, tmp_path):
    from pathlib import Path

    import yaml

    from karpenter_lambda.cli.main import main

    default = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"team": "a"}}}]
    for name, ns, labels, aff in (("a1", "a", {"app": "x"}, None), ("b1", "b", {"app": "y"}, _affinity())):
        spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
        if aff:
            spec["affinity"] = aff
        docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
                     "spec": spec})
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "--json", "-f", str(default), "-f", str(f)])
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    plan = json.loads(out)
    assert not plan.get("unschedulable"), plan
    (claim,) = plan["nodeClaims"]
    assert sorted(claim["pods"]) == ["a/a1", "b/b1"]
    assert "Namespace/a" not in err


def test_the_snapshot_loader_lists_namespaces_only_when_a_pod_selects_them():
    from karpenter_lambda.controllers.snapshot import SnapshotLoader

    class Kube:
        calls = 0

        def list_namespaces(self):
            self.calls += 1
            return [{"metadata": {"name": "a", "labels": {"team": "a"}}}]

    kube = Kube()
    loader = SnapshotLoader(None, kube)
    plain = ClusterSnapshot(now=0.0, pods=[pod("a1", ns="a", labels={"app": "x"}), pod("b2", ns="b", affinity=_affinity(selector={}))])
    loader.load_namespaces(plain)
    assert plain.namespaces is None and plain.namespace_labels is None and kube.calls == 0
    snap = ClusterSnapshot(now=0.0, pods=[pod("b1", ns="b", affinity=_affinity())])
    loader.load_namespaces(snap)
    assert kube.calls == 1 and snap.namespace_labels == {"a": {"team": "a"}, "b": {}}
