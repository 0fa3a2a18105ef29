"""An instance that is going away for another reason than a spot warning (a stop, an AWS Health scheduled change)
gets the capacity for its pods at once, as a spot warning does: Karpenter's provisioner counts the pods of a
deleting node as pending, so they never wait for the drain to reach them.  End to end in the simulator: a node of 7
pods stopped, its drain paced by a PodDisruptionBudget (2 at a time)."""

from __future__ import annotations

from pathlib import Path

import yaml

from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]

WORK = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"replicas": 7, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "nginx",
                                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "web"}}}},
    {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "stop"},
     "spec": {"steps": [{"at": "5m", "interrupt": {"kind": "StateChange", "state": "stopping", "nodePool": "default",
                                                    "count": 1}}]}},
]


def test_a_stopped_node_gets_its_replacement_at_once_and_the_paced_drain_lands_on_it(tmp_path):
    (tmp_path / "work.yaml").write_text(yaml.safe_dump_all(WORK))
    d = Simulation([REPO / "examples" / "default.yaml", tmp_path / "work.yaml"],
                   progress=lambda m: None).run().to_dict()
    ev = d["events"]
    first = [e for e in ev if e["type"] == "NodeClaimLaunched" and e["time"] < 300]
    assert len(first) == 1 and "for 7 pods" in first[0]["message"], first   # one node holds the 7 pods
    stopped = first[0]["object"]
    (disrupted,) = [e for e in ev if e["type"] == "NodeClaimDisrupted"]
    assert disrupted["object"] == stopped and disrupted["reason"] == "InstanceStopped" and disrupted["time"] == 300
    # its replacement launched with the notice, before any pod was evicted, and it is the only launch after it
    later = [e for e in ev if e["type"] == "NodeClaimLaunched" and e["time"] >= 300]
    assert len(later) == 1 and later[0]["time"] == 300 and later[0]["object"].split("/")[1] in disrupted["replacements"]
    evicted = [e for e in ev if e["type"] == "PodEvicted"]
    assert len(evicted) == 7 and min(e["time"] for e in evicted) >= later[0]["time"]
    # the PDB paced the drain (at most 2 at a time), and no pod waited longer than the replacement's launch-to-ready
    assert len({e["time"] for e in evicted}) >= 4
    assert all(e["seconds"] <= 60 for e in ev if e["type"] == "PodsDisplaced")
    assert d["pods"] == {"total": 7, "bound": 7} and len(d["nodeClaims"]) == 1


def test_a_scheduled_change_drains_only_onto_the_initialized_replacement(tmp_path):
    """An AWS Health scheduled change is days ahead: the drain waits for the replacement launched at the notice to
    initialize (controllers/termination.HOLD_FOR_REPLACEMENTS), so no pod is ever Pending (a stop above drains at once:
    that instance is going now).  The StatefulSet's pods keep their volumes' zones through the move."""
    scenario = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "maintenance"},
                "spec": {"steps": [{"at": "5m", "interrupt": {"kind": "ScheduledChange", "nodePool": "default",
                                                               "count": 3}}]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    d = Simulation([REPO / "examples" / "default.yaml", REPO / "examples" / "stateful" / "db.yaml",
                    REPO / "examples" / "stateful" / "prebound.yaml", tmp_path / "s.yaml"],
                   progress=lambda m: None).run().to_dict()
    ev = d["events"]
    disrupted = [e for e in ev if e["type"] == "NodeClaimDisrupted"]
    assert len(disrupted) == 3 and {e["reason"] for e in disrupted} == {"ScheduledChange"}
    initialized = {e["object"].split("/")[1]: e["time"] for e in ev if e["type"] == "NodeClaimInitialized"}
    evicted = [e for e in ev if e["type"] == "PodEvicted"]
    assert len(evicted) == 3
    waiting = [e for e in ev if e["type"] == "DrainWaiting"]   # said once per held drain, naming its replacement
    assert sorted(e["object"] for e in waiting) == sorted(e["object"] for e in disrupted)
    assert sorted(r for e in waiting for r in e["replacements"]) == sorted(r for e in disrupted for r in e["replacements"])
    replacements = [r for e in disrupted for r in e["replacements"]]
    assert len(replacements) == 3 and max(initialized[r] for r in replacements) <= min(x["time"] for x in evicted)
    # no pod waited: nothing Pending after the first binding, nothing displaced
    assert not [e for e in ev if e["type"] in ("PodPending", "PodsDisplaced") and e["time"] >= 300]
    zones = {e["object"]: e["zone"] for e in disrupted}
    assert sorted(zones.values()) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert d["pods"] == {"total": 3, "bound": 3} and len(d["nodeClaims"]) == 3
    assert sorted(c["zone"] for c in d["nodeClaims"]) == ["us-east-1a", "us-east-1b", "us-east-1c"]


def _deployment(name: str, capacity_type: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": {"karpenter.sh/capacity-type": capacity_type},
                                           "containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def test_interrupt_steps_hit_what_ec2_would_and_a_terminated_instance_is_gone(tmp_path):
    """A SpotInterruption step reaches only the NodePool's spot NodeClaims (EC2 warns no other), however many it
    asks for; a StateChange ``terminated`` terminates the instance and its Node turns NotReady, so the NodeClaim goes
    although a PodDisruptionBudget refuses every eviction (before, the instance kept running, its Node Ready and
    tainted, billed to the end); a step with nothing left to hit is skipped with an event, the run goes on."""
    pool = yaml.safe_load_all((REPO / "examples" / "default.yaml").read_text())
    docs = [_deployment("od", "on-demand"), _deployment("sp", "spot"),
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "od", "namespace": "default"},
             "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "od"}}}},
            {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "hits"},
             "spec": {"steps": [
                 {"at": "0s", "interrupt": {"kind": "SpotInterruption", "nodePool": "default"}},
                 {"at": "3m", "interrupt": {"kind": "SpotInterruption", "nodePool": "default", "count": 5}},
                 {"at": "4m", "interrupt": {"kind": "StateChange", "state": "terminated", "nodePool": "default",
                                            "count": 1}}]}}]
    (tmp_path / "work.yaml").write_text(yaml.safe_dump_all(list(pool) + docs))
    d = Simulation([tmp_path / "work.yaml"], until=20 * 60.0, progress=lambda m: None).run().to_dict()
    ev = d["events"]
    first = {e["object"]: e for e in ev if e["type"] == "NodeClaimLaunched" and e["time"] < 120}
    kind = {o: ("spot" if " spot " in e["message"] else "on-demand") for o, e in first.items()}
    spot_warned = [e["object"] for e in ev if e["type"] == "InterruptionReceived" and e["kind"] == "SpotInterruption"]
    assert spot_warned and all(kind.get(o) == "spot" for o in spot_warned)
    (ended,) = [e for e in ev if e["type"] == "NodeClaimDisrupted" and e["reason"] == "InstanceTerminated"]
    assert kind[ended["object"]] == "on-demand"
    assert ended["object"] in {e["object"] for e in ev if e["type"] == "NodeClaimDeleted"}
    assert ended["object"].split("/")[1] not in {c["name"] for c in d["nodeClaims"]}
    assert [(e["kind"], e["time"]) for e in ev if e["type"] == "InterruptionSkipped"] == [("SpotInterruption", 0.0)]
    assert d["pods"] == {"total": 2, "bound": 2}
