"""`simulate` with zonal volumes (issue 28): examples/stateful/ on the default NodePool.

The StatefulSet db (3 replicas, one per node, a gp3 claim each) with its claims bound to volumes in us-east-1a, b and
c must get a node in each volume's zone; a volume in a zone its NodePool excludes keeps its pod Pending without a
node launched for it; with WaitForFirstConsumer the volumes are provisioned in the zones of the pods' nodes."""

from __future__ import annotations

from pathlib import Path

import yaml

from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]
STATEFUL = REPO / "examples" / "stateful"
DEFAULT = REPO / "examples" / "default.yaml"


def _run(files, until=None):
    """The result and the simulated API server's store (kept after the run)."""
    box = {}
    result = Simulation(files, until=until, progress=lambda m: None,
                        setup_hook=lambda sim: box.setdefault("store", sim.server.store)).run()
    return result, box["store"]


def _zone_of_pods(result) -> dict[str, str]:
    return {pod: c["zone"] for c in result.nodeclaims for pod in c["pods"] if c["nodeName"]}


def _pv_zone(pv: dict) -> str:
    return pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]


def test_each_pod_runs_in_the_zone_of_its_bound_volume():
    result, store = _run([DEFAULT, STATEFUL / "db.yaml", STATEFUL / "prebound.yaml"], until=90.0)
    assert result.unschedulable == [] and result.pods_bound == result.pods_total == 3
    assert _zone_of_pods(result) == {"default/db-0": "us-east-1a", "default/db-1": "us-east-1b", "default/db-2": "us-east-1c"}
    pods = {p["metadata"]["name"]: p for p in store.list("pods")}
    assert {n: p["status"]["phase"] for n, p in pods.items()} == {"db-0": "Running", "db-1": "Running", "db-2": "Running"}
    assert {n: p["spec"]["volumes"][-1]["persistentVolumeClaim"]["claimName"] for n, p in pods.items()} == {
        "db-0": "data-db-0", "db-1": "data-db-1", "db-2": "data-db-2"}
    assert store.list("persistentvolumes") and all(pv["metadata"]["name"].startswith("db-data-") for pv in store.list("persistentvolumes"))
    bound = [e for e in result.to_dict()["events"] if e["type"] == "VolumeBound"]
    assert [(e["object"], e["volume"], e["zone"]) for e in bound] == [
        ("pvc/default/data-db-0", "db-data-0", "us-east-1a"), ("pvc/default/data-db-1", "db-data-1", "us-east-1b"),
        ("pvc/default/data-db-2", "db-data-2", "us-east-1c")]
    # every node registered its CSINode with the EBS attach limit of its instance type
    csinodes = store.list("csinodes")
    assert sorted(c["metadata"]["name"] for c in csinodes) == sorted(c["nodeName"] for c in result.nodeclaims)
    assert all(c["spec"]["drivers"][0]["allocatable"]["count"] > 0 for c in csinodes)


def test_a_volume_in_a_zone_the_nodepool_excludes_keeps_its_pod_pending_without_a_node(tmp_path):
    docs = list(yaml.safe_load_all(DEFAULT.read_text()))
    docs[0]["spec"]["template"]["spec"]["requirements"].append(
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]})
    (tmp_path / "nodepool.yaml").write_text(yaml.safe_dump_all(docs))
    result, store = _run([tmp_path / "nodepool.yaml", STATEFUL / "db.yaml", STATEFUL / "prebound.yaml"])
    out = result.to_dict()
    assert _zone_of_pods(result) == {"default/db-0": "us-east-1a", "default/db-1": "us-east-1b"}
    launched = [e for e in out["events"] if e["type"] == "NodeClaimLaunched"]
    assert len(launched) == 2 and len(out["nodeClaims"]) == 2 and len(store.list("nodes")) == 2
    assert [u["pod"] for u in out["unschedulable"]] == ["default/db-2"]
    reason = out["unschedulable"][0]["reason"]
    assert "data-db-2" in reason and "us-east-1c" in reason, reason
    pod = store.get("pods", "db-2", "default")
    assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending"
    assert store.get("persistentvolumeclaims", "data-db-2", "default")["spec"]["volumeName"] == "db-data-2"


def test_wait_for_first_consumer_provisions_each_volume_in_its_pods_zone():
    result, store = _run([DEFAULT, STATEFUL / "db.yaml"], until=90.0)
    assert result.unschedulable == [] and result.pods_bound == 3
    zones = _zone_of_pods(result)
    claims = {c["metadata"]["name"]: c for c in store.list("persistentvolumeclaims")}
    assert sorted(claims) == ["data-db-0", "data-db-1", "data-db-2"]
    pvs = {pv["metadata"]["name"]: pv for pv in store.list("persistentvolumes")}
    assert len(pvs) == 3
    for i in range(3):
        pvc = claims[f"data-db-{i}"]
        assert pvc["status"]["phase"] == "Bound"
        pv = pvs[pvc["spec"]["volumeName"]]
        assert pv["spec"]["csi"]["driver"] == "ebs.csi.aws.com" and pv["spec"]["storageClassName"] == "gp3"
        assert _pv_zone(pv) == zones[f"default/db-{i}"]
        node = store.get("pods", f"db-{i}", "default")["spec"]["nodeName"]
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    bound = {e["object"]: e["zone"] for e in result.to_dict()["events"] if e["type"] == "VolumeBound"}
    assert bound == {f"pvc/default/data-db-{i}": zones[f"default/db-{i}"] for i in range(3)}


def test_the_example_validates_with_the_default_nodepool(capsys):
    from karpenter_lambda.cli.main import main

    assert main(["validate", str(STATEFUL), str(DEFAULT)]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("valid: 10 objects in 3 files\n", "")
