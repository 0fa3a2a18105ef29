"""`plan` sees what a pod's volumes ask (issue 28): the StatefulSet example's claims bound to volumes in three zones
put each replica's node in its volume's zone; with the NodePool kept out of one zone, that replica is unschedulable
with a reason naming its claim and volume, and nothing is launched for it."""

import json
from pathlib import Path

import yaml

from karpenter_lambda.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _plan(capsys, *files) -> dict:
    code = main(["plan", *[a for f in files for a in ("-f", str(f))], "--json"])
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert code == (3 if data["unschedulable"] else 0), out.err   # exit 3: pods stay unschedulable
    return data


def _volume_zones() -> dict[str, str]:
    """claim name -> the zone its prebound volume requires, read from the example."""
    docs = list(yaml.safe_load_all((EXAMPLES / "stateful" / "prebound.yaml").read_text()))
    pv_zone = {d["metadata"]["name"]: d["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
               for d in docs if d and d["kind"] == "PersistentVolume"}
    return {d["metadata"]["name"]: pv_zone[d["spec"]["volumeName"]]
            for d in docs if d and d["kind"] == "PersistentVolumeClaim"}


def test_each_replica_is_planned_in_its_bound_volumes_zone(capsys):
    zones = _volume_zones()
    assert len(set(zones.values())) == 3
    data = _plan(capsys, EXAMPLES / "default.yaml", EXAMPLES / "stateful")
    assert data["unschedulable"] == []
    got = {p: c["zone"] for c in data["nodeClaims"] for p in c["pods"]}
    assert got == {f"default/db-{i}": zones[f"data-db-{i}"] for i in range(3)}


def test_a_replica_whose_volume_is_outside_the_nodepool_is_unschedulable_naming_it(capsys, tmp_path):
    zones = _volume_zones()
    excluded = zones["data-db-2"]
    docs = list(yaml.safe_load_all((EXAMPLES / "default.yaml").read_text()))
    for d in docs:
        if d and d["kind"] == "NodePool":
            reqs = d["spec"]["template"]["spec"].setdefault("requirements", [])
            reqs.append({"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": [excluded]})
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump_all(docs))
    data = _plan(capsys, pools, EXAMPLES / "stateful")
    assert [u["pod"] for u in data["unschedulable"]] == ["default/db-2"]
    reason = data["unschedulable"][0]["reason"]
    assert "PVC data-db-2" in reason and excluded in reason, reason
    assert sorted(p for c in data["nodeClaims"] for p in c["pods"]) == ["default/db-0", "default/db-1"]


def test_a_statefulset_without_claim_manifests_gets_its_claims_from_the_templates(capsys):
    # no PVC in the files: the claims are made as the StatefulSet controller would (unbound, class gp3), not "not found"
    data = _plan(capsys, EXAMPLES / "default.yaml", EXAMPLES / "stateful" / "db.yaml")
    assert data["unschedulable"] == [] and sum(len(c["pods"]) for c in data["nodeClaims"]) == 3
