"""``simulate --scheduler-config FILE``: the cluster's kube-scheduler is configured with default topology spread
constraints, and so are the functions (``KARPENTER_LAMBDA_SCHEDULER_CONFIG``, set after the run scrubs the shell's
settings).  The simulated kube-scheduler gives pods without constraints of their own the defaults, with the selector
deduced from the stored Services and the pods' ReplicaSet, which the simulated workload controller keeps in the API
server for each Deployment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.kubescheduler import schedule_pending
from karpenter_lambda.sim.nodes import make_node
from karpenter_lambda.sim.workloads import WorkloadController

from manifests import workload

REPO = Path(__file__).resolve().parents[2]

ENV = "KARPENTER_LAMBDA_SCHEDULER_CONFIG"
ZONE = "topology.kubernetes.io/zone"
SMALL = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
DEFAULTS = ({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},)
CONFIG = {"podTopologySpread": {"defaultConstraints": list(DEFAULTS)}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}


# -- the workload controller keeps a Deployment's ReplicaSet in the API server ---------------------------------------
def test_a_deployment_has_the_replicaset_its_pods_name(kube_api_server):
    store = kube_api_server.store
    wc = WorkloadController(kube_api_server)
    dep = workload("web", SMALL, replicas=2, namespace="team")
    wc.add(dep)
    wc.reconcile()
    (rs,) = store.list("replicasets", namespace="team")
    pods = store.list("pods", namespace="team")
    assert len(pods) == 2
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in pods} == {rs["metadata"]["name"]}
    h = rs["metadata"]["name"].rsplit("-", 1)[1]   # the Deployment controller's pod-template-hash
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", "pod-template-hash": h}} and rs["spec"]["replicas"] == 2
    assert all(p["metadata"]["labels"]["pod-template-hash"] == h for p in pods)
    assert [(r["kind"], r["name"], r["controller"]) for r in rs["metadata"]["ownerReferences"]] == [("Deployment", "web", True)]

    wc.scale("Deployment", "team", "web", 3)
    wc.reconcile()
    assert store.get("replicasets", rs["metadata"]["name"], "team")["spec"]["replicas"] == 3

    wc.add(workload("web", {"containers": [{**SMALL["containers"][0], "image": "nginx:2"}]}, replicas=3, namespace="team"))
    wc.reconcile()       # a new template: a new ReplicaSet, the old one gone with its pods
    (new,) = store.list("replicasets", namespace="team")
    assert new["metadata"]["name"] != rs["metadata"]["name"]
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in store.list("pods", namespace="team")} == {new["metadata"]["name"]}

    wc.delete("Deployment", "team", "web")
    assert store.list("replicasets", namespace="team") == [] and store.list("pods", namespace="team") == []


def test_a_deployment_deleted_through_the_api_takes_its_replicaset(kube_api_server):
    store = kube_api_server.store
    wc = WorkloadController(kube_api_server)
    wc.add(workload("web", SMALL, replicas=1))
    wc.reconcile()
    assert len(store.list("replicasets")) == 1
    store.delete("deployments", "web", "default")
    wc.reconcile()
    assert store.list("replicasets") == [] and store.list("pods") == []


# -- the simulated kube-scheduler applies the defaults -----------------------------------------------------------------
def _nodes(store) -> None:
    """A big node in us-east-1a, two small ones in b and c: least-allocated scoring puts every pod on the big one."""
    for name, zone, cpu in (("big", "us-east-1a", "16"), ("small-b", "us-east-1b", "2"), ("small-c", "us-east-1c", "2")):
        store.create("nodes", make_node(name, f"aws:///{zone}/i-{name}", "m5.large", zone,
                                        {"cpu": cpu, "memory": "64Gi", "pods": "50"}, ready=True))


def _zones_of_pods(store) -> list[str]:
    zone = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in store.list("nodes")}
    return sorted(zone[p["spec"]["nodeName"]] for p in store.list("pods") if p["spec"].get("nodeName"))


@pytest.mark.parametrize("with_service, over_http", [(True, False), (False, False), (False, True)])
def test_the_kube_scheduler_spreads_pods_without_constraints_by_the_defaults(kube_api_server, with_service, over_http):
    """By the Service's selector, or by the ReplicaSet's alone; in process or through KubeClient over HTTP (whose
    list of ReplicationControllers the simulated API server does not serve: none)."""
    store = kube_api_server.store
    _nodes(store)
    if with_service:
        store.create("services", SERVICE, "default")
    wc = WorkloadController(kube_api_server)
    wc.add(workload("web", SMALL, replicas=3))
    wc.reconcile()
    if over_http:
        kc = KubeClient.from_host(kube_api_server.url, backoff_base=0.001, backoff_cap=0.01)
        try:
            res = schedule_pending(kc, default_spread=DEFAULTS)
        finally:
            kc.close()
    else:
        res = schedule_pending(kube_api_server, default_spread=DEFAULTS)
    assert len(res.bound) == 3 and res.unschedulable == {}
    assert _zones_of_pods(store) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    # the pods in the API server are not changed (the defaults are the scheduler's, not the pods')
    assert all(not p["spec"].get("topologySpreadConstraints") for p in store.list("pods"))


def test_without_defaults_or_for_pods_with_their_own_constraints_nothing_changes(kube_api_server):
    store = kube_api_server.store
    _nodes(store)
    store.create("services", SERVICE, "default")
    wc = WorkloadController(kube_api_server)
    wc.add(workload("web", SMALL, replicas=3))
    wc.add(workload("own", {**SMALL, "topologySpreadConstraints": [
        {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "own"}}}]},
        replicas=3))
    wc.reconcile()
    schedule_pending(kube_api_server, default_spread=DEFAULTS)
    own = sorted(p["spec"]["nodeName"] for p in store.list("pods") if p["metadata"]["name"].startswith("own-"))
    assert own == ["big", "big", "big"]          # its own maxSkew 5, not the default's 1
    for p in store.list("pods"):
        store.delete("pods", p["metadata"]["name"], "default")
    wc.reconcile()
    schedule_pending(kube_api_server)            # no defaults configured: packed by least-allocated scoring
    web = sorted(p["spec"]["nodeName"] for p in store.list("pods") if p["metadata"]["name"].startswith("web-"))
    assert web == ["big", "big", "big"]


# -- one whole simulation, with and without the setting -----------------------------------------------------------------
def _simulate(capsys, tmp_path, *flags) -> dict:
    work = tmp_path / "web.yaml"
    work.write_text("---\n".join(yaml.safe_dump(d) for d in (workload("web", SMALL, replicas=3), SERVICE)))
    code = main(["simulate", str(REPO / "examples" / "default.yaml"), str(work), "--json", "--quiet", "--until", "90s",
                 *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)



def test_simulate_spreads_a_deployment_over_three_zones_with_the_setting(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "podTopologySpread: {defaultConstraints: [{maxSkew: -1}]}")   # the flag wins over it
    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    state = tmp_path / "state"
    res = _simulate(capsys, tmp_path, "--scheduler-config", str(config), "--save-state", str(state))
    assert res["pods"] == {"total": 3, "bound": 3} and res["unschedulable"] == []
    assert res["defaultSpreadConstraints"] == list(DEFAULTS)
    web = [(c["zone"], p) for c in res["nodeClaims"] for p in c["pods"] if p.startswith("default/web-")]
    assert len(web) == 3 and sorted(z for z, _ in web) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    bound = {e["object"] for e in res["events"] if e["type"] == "PodBound"}
    assert bound == {f"pod/{p}" for _, p in web}
    launched = [e for e in res["events"] if e["type"] == "NodeClaimLaunched"]
    assert len(launched) == len(res["nodeClaims"]) == 3
    # the saved state carries the setting (the offline commands get it back) and the objects it is deduced from
    saved = json.loads((state / "state.json").read_text())
    assert json.loads(saved["functionEnv"][ENV]) == CONFIG
    kube = json.loads((state / "kube.json").read_text())
    assert [s["metadata"]["name"] for s in kube["services"]] == ["web"]
    (rs,) = kube["replicasets"]
    assert {p.split("/")[1].rsplit("-", 1)[0] for _, p in web} == {rs["metadata"]["name"]}


def test_simulate_without_the_setting_packs_the_deployment_on_one_node(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    res = _simulate(capsys, tmp_path)
    assert res["pods"] == {"total": 3, "bound": 3} and "defaultSpreadConstraints" not in res
    assert len(res["nodeClaims"]) == 1 and len(res["nodeClaims"][0]["pods"]) == 3


def test_simulate_refuses_a_bad_file_naming_it_and_the_field(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("podTopologySpread:\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: z, whenUnsatisfiable: Later}\n")
    code = main(["simulate", str(REPO / "examples" / "default.yaml"), "--quiet", "--scheduler-config", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and str(bad) in err and "defaultConstraints[0].whenUnsatisfiable" in err
