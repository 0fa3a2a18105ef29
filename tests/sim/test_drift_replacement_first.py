"""Issue 28 item 4, end to end: a drift run of a NodePool whose pods all have hostname anti-affinity shows no pod
Pending for more than the replacement's launch-to-ready time, read from the ``simulate --json`` events.

``examples/scenarios/drift-replacement-first.yaml``: a StatefulSet of 3 replicas with required anti-affinity on
``kubernetes.io/hostname`` (one per node), a NodePool whose budget lets every node go at once, a changed
EC2NodeClass at 2m.  Before the fix the third node's pod was placed, on paper, on the second node's replacement (its
placeholders were dropped because that node was itself in flight), so the third node was drained with no replacement
and its pod sat Pending for the provisioner's whole launch (60 s here)."""

from __future__ import annotations

from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "drift-replacement-first.yaml"


def _pods_of(e: dict) -> list[str]:
    """The pods an event is about (one ``pod/NS/NAME``, or a folded line's ``pods``)."""
    if e["object"].startswith("pod/"):
        return [e["object"].split("/", 1)[1]]
    return list(e.get("pods") or [])


def pending_seconds(events: list[dict], since: float) -> dict[str, float]:
    """Pod -> the longest time it spent without a node after ``since``: from losing it (evicted) or being marked
    Pending until bound again (inf when it never was)."""
    lost: dict[str, float] = {}
    worst: dict[str, float] = {}
    for e in events:
        if e["time"] < since:
            continue
        if e["type"] in ("PodEvicted", "PodPending"):
            for p in _pods_of(e):
                lost.setdefault(p, e["time"])
        elif e["type"] == "PodBound":
            for p in _pods_of(e):
                if p in lost:
                    worst[p] = max(worst.get(p, 0.0), e["time"] - lost.pop(p))
    worst.update({p: float("inf") for p in lost})
    return worst


def test_a_drift_of_anti_affinity_pods_leaves_none_pending_longer_than_a_launch():
    d = Simulation([SCENARIO], progress=lambda m: None).run().to_dict()
    events = d["events"]
    step = next(e["time"] for e in events if e["type"] == "ScenarioStep")
    launched = {e["object"]: e for e in events if e["type"] == "NodeClaimLaunched"}
    initialized = {e["object"]: e["time"] for e in events if e["type"] == "NodeClaimInitialized"}
    replacements = {o: e for o, e in launched.items() if e.get("replaces")}
    # the launch-to-ready time of the replacements, from the events
    ready_after = {o: initialized[o] - e["time"] for o, e in replacements.items() if o in initialized}
    assert ready_after and len(ready_after) == len(replacements)
    launch_to_ready = min(ready_after.values())
    assert launch_to_ready > 0

    disrupted = [e for e in events if e["type"] == "NodeClaimDisrupted"]
    first = {e["object"]: e["time"] for e in events if e["type"] == "NodeClaimLaunched" and e["time"] < step}
    assert {e["object"] for e in disrupted} == set(first)                  # every node drifted and went
    assert len(disrupted) == len(first) == 3                               # exactly one event per disruption
    for e in disrupted:                                                    # each replaced first, then drained
        assert e["reason"] == "Drifted" and e["replacements"], e
        for r in e["replacements"]:
            assert initialized[f"nodeclaim/{r}"] <= e["time"]

    pending = pending_seconds(events, since=step)
    assert set(pending) == {"default/db-0", "default/db-1", "default/db-2"}   # every pod was moved
    assert max(pending.values()) < launch_to_ready, (pending, launch_to_ready)
    assert d["pods"] == {"total": 3, "bound": 3} and len(d["nodeClaims"]) == 3
