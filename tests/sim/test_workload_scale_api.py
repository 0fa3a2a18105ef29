"""The simulator's workload controller takes Deployment/StatefulSet replicas from the API server: a scale through
the API (as the off-peak function does it, with KubeClient over HTTP) changes the simulated pods."""

import json
from pathlib import Path

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.sim.kubeapi import KubeAPIServer
from karpenter_lambda.sim.simulator import Simulation
from karpenter_lambda.sim.workloads import WorkloadController

REPO = Path(__file__).resolve().parents[2]


def _workload(kind, name, replicas, ns="dev", image="nginx"):
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": ns, "labels": {"tier": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


@pytest.fixture
def env():
    srv = KubeAPIServer()
    srv.start()
    kc = KubeClient.from_host(srv.url, backoff_base=0.001, backoff_cap=0.01)
    yield srv, kc, WorkloadController(srv)
    kc.close()
    srv.stop()


def _pods(srv, prefix, ns="dev"):
    return sorted(p["metadata"]["name"] for p in srv.store.list("pods", namespace=ns) if p["metadata"]["name"].startswith(prefix))


def test_a_deployment_scaled_through_the_api_changes_the_pods(env):
    srv, kc, wc = env
    wc.add(_workload("Deployment", "web", 3))
    assert kc.get_workload("Deployment", "dev", "web")["spec"]["replicas"] == 3    # the manifest is an API object
    assert wc.reconcile() == 3 and len(_pods(srv, "web-")) == 3
    assert kc.get_workload("Deployment", "dev", "web")["status"]["replicas"] == 3
    first = _pods(srv, "web-")

    kc.scale_workload("Deployment", "dev", "web", 1)
    assert wc.reconcile() == 2
    assert len(_pods(srv, "web-")) == 1 and set(_pods(srv, "web-")) <= set(first)
    assert wc.replicas() == [{"kind": "Deployment", "namespace": "dev", "name": "web", "replicas": 1}]
    status = kc.get_workload("Deployment", "dev", "web")["status"]
    assert status["replicas"] == 1 and status["observedGeneration"] == 2

    kc.scale_workload("Deployment", "dev", "web", 0)
    wc.reconcile()
    assert _pods(srv, "web-") == [] and kc.get_workload("Deployment", "dev", "web")["status"]["replicas"] == 0
    kc.scale_workload("Deployment", "dev", "web", 4)
    assert wc.reconcile() == 4 and len(_pods(srv, "web-")) == 4
    assert wc.reconcile() == 0                       # converged: nothing more to do


def test_a_statefulset_scaled_through_the_api_keeps_the_lowest_ordinals(env):
    srv, kc, wc = env
    wc.add(_workload("StatefulSet", "db", 3))
    wc.reconcile()
    assert _pods(srv, "db-") == ["db-0", "db-1", "db-2"]
    kc.scale_workload("StatefulSet", "dev", "db", 1)
    wc.reconcile()
    assert _pods(srv, "db-") == ["db-0"]
    kc.scale_workload("StatefulSet", "dev", "db", 2)
    wc.reconcile()
    assert _pods(srv, "db-") == ["db-0", "db-1"]
    assert wc.replicas() == [{"kind": "StatefulSet", "namespace": "dev", "name": "db", "replicas": 2}]


def test_ready_replicas_follow_the_bound_pods(env):
    srv, kc, wc = env
    wc.add(_workload("StatefulSet", "db", 2))
    wc.reconcile()
    srv.store.create("nodes", {"metadata": {"name": "n1"}})
    srv.store.bind("dev", "db-0", "n1")
    wc.reconcile()
    st = kc.get_workload("StatefulSet", "dev", "db")["status"]
    assert (st["replicas"], st["readyReplicas"]) == (2, 1)


def test_deleting_a_workload_through_the_api_deletes_its_pods(env):
    srv, kc, wc = env
    wc.add(_workload("Deployment", "web", 2))
    wc.add(_workload("StatefulSet", "db", 2))
    wc.reconcile()
    srv.store.delete("deployments", "web", "dev")
    assert wc.reconcile() == 2
    assert _pods(srv, "web-") == [] and _pods(srv, "db-") == ["db-0", "db-1"]
    assert wc.get("Deployment", "dev", "web") is None
    assert wc.replicas() == [{"kind": "StatefulSet", "namespace": "dev", "name": "db", "replicas": 2}]
    srv.store.delete("statefulsets", "db", "dev")
    assert wc.replicas() == []                      # gone from the API: not reported, even before the reconcile
    wc.reconcile()
    assert srv.store.list("pods", namespace="dev") == []
    with pytest.raises(KeyError):
        wc.scale("StatefulSet", "dev", "db", 1)


def test_scenario_scale_delete_and_apply_go_to_the_api_object(env):
    srv, kc, wc = env
    wc.add(_workload("Deployment", "web", 2))
    wc.reconcile()
    wc.scale("Deployment", "dev", "web", 3)          # a Scenario `scale` step
    assert kc.get_workload("Deployment", "dev", "web")["spec"]["replicas"] == 3
    wc.reconcile()
    assert len(_pods(srv, "web-")) == 3
    kc.patch_workload("Deployment", "dev", "web", {"metadata": {"annotations": {"note": "kept until an apply"}}})
    wc.add(_workload("Deployment", "web", 1, image="nginx:2"))   # a Scenario `apply`: the manifest replaces the object
    obj = kc.get_workload("Deployment", "dev", "web")
    assert obj["spec"]["replicas"] == 1 and "annotations" not in obj["metadata"]
    assert obj["status"]["replicas"] == 3            # status is the controller's, kept across the apply
    wc.reconcile()
    (pod,) = [srv.store.get("pods", n, "dev") for n in _pods(srv, "web-")]
    assert pod["spec"]["containers"][0]["image"] == "nginx:2"
    wc.delete("Deployment", "dev", "web")            # a Scenario `delete` step
    assert kc.get_workload("Deployment", "dev", "web") is None and _pods(srv, "web-") == []
    with pytest.raises(KeyError):
        wc.delete("Deployment", "dev", "web")


def test_replicasets_jobs_and_pods_are_not_api_objects(env):
    srv, kc, wc = env
    rs = _workload("ReplicaSet", "rs", 2)
    wc.add(rs)
    wc.reconcile()
    assert srv.store.list("replicasets") == [] and len(_pods(srv, "rs-")) == 2
    wc.scale("ReplicaSet", "dev", "rs", 1)
    wc.reconcile()
    assert len(_pods(srv, "rs-")) == 1


def test_simulate_reports_the_replicas_set_through_the_api(tmp_path):
    """A whole simulation: the Deployment of the manifest is scaled through the API before the loop starts;
    the run ends with the API's replicas bound and reported in --json's `workloads`."""
    dep = _workload("Deployment", "web", 1, ns="default")
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    work = tmp_path / "work.yaml"
    work.write_text(json.dumps(dep))

    def scale_through_the_api(sim):
        kc = KubeClient.from_host(sim.server.url)
        try:
            kc.scale_workload("Deployment", "default", "web", 3)
        finally:
            kc.close()

    result = Simulation([REPO / "examples" / "default.yaml", work], progress=lambda m: None,
                        setup_hook=scale_through_the_api).run()
    d = result.to_dict()
    assert [{k: w[k] for k in ("kind", "namespace", "name", "replicas")} for w in d["workloads"]] == [
        {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 3}]
    assert d["pods"] == {"total": 3, "bound": 3}
