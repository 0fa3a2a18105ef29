"""End to end: a NodePool requiring its own label key with several values (or Exists / Gt) launches nodes carrying a
value it allows, and drift leaves them alone.  Before, the NodeClaim and Node lacked the label, drift found them
RequirementsDrifted and replaced them every few minutes, evicting every pod each time."""

from __future__ import annotations

import pytest
import yaml

import manifests as shared
from karpenter_lambda.sim.simulator import Simulation

WORK = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                  "requests": {"cpu": "500m", "memory": "256Mi"}}}]}}}}


@pytest.mark.parametrize("req, key, value", [
    ({"key": "team", "operator": "In", "values": ["b", "a"]}, "team", "a"),
    ({"key": "example.com/gen", "operator": "Gt", "values": ["3"]}, "example.com/gen", "4"),
])
def test_nodes_carry_a_value_of_their_nodepools_custom_requirement_and_do_not_drift(tmp_path, req, key, value):
    pool = shared.pair(nodeclass_kw={"role": "KarpenterNodeRole-sim", "discovery": "sim"}, cpu_limit=None,
                       requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                     req])
    (tmp_path / "pool.yaml").write_text(pool)
    (tmp_path / "work.yaml").write_text(yaml.safe_dump(WORK))
    seen: dict = {}

    def on_event(e):   # the NodeClaim's and its Node's labels once the node is up
        if e.type == "NodeClaimInitialized" or (e.type == "NodeReady" and "node" not in seen):
            for nc in sim.store.list("NodeClaim"):
                seen["claim"] = nc.metadata.get("labels") or {}
                node = sim.server.store.get("nodes", (nc.status or {}).get("nodeName") or "")
                if node:
                    seen["node"] = node["metadata"].get("labels") or {}

    sim = Simulation([tmp_path / "pool.yaml", tmp_path / "work.yaml"], progress=lambda m: None, until=20 * 60,
                     on_event=on_event)
    d = sim.run().to_dict()
    assert [e["type"] for e in d["events"] if e["type"] == "NodeClaimLaunched"] == ["NodeClaimLaunched"]
    assert not [e for e in d["events"] if e["type"] == "NodeClaimDisrupted"]
    assert seen["claim"][key] == value and seen["node"][key] == value
    assert d["pods"] == {"total": 2, "bound": 2}
