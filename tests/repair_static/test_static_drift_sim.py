"""Static drift end to end (``simulate``, as the audit's repro): a static NodePool (``replicas: 2``) drifts when its
EC2NodeClass's tags change at 3m.  Before the fix its nodes running pods were never replaced (``DisruptionBlocked
... Drifted: pod ...: no NodePool`` for good: the ordinary drift needs the pods to fit elsewhere and the solver
leaves static NodePools out); with a dynamic NodePool present a static node's pods got a dynamic node and a new
static node was launched only once the old one was gone (3 NodeClaims for 2 pods); an empty static node was
deleted first and relaunched a minute later.

Now, in each of the three runs (pods pinned to the static NodePool; a dynamic NodePool beside it and pods that could
go either way; no pods at all): every drifted static NodeClaim is disrupted once (``Drifted``), after its one
replacement -- a static NodeClaim replacing it -- is launched and Initialized; the static count of NodeClaims not
being deleted never drops below 2 (and goes back to 2); the pods are bound again the moment they are evicted; at
15m there are 2 NodeClaims, both new.  One run each, about 5 s."""

from __future__ import annotations

import pytest

import manifests as shared
from karpenter_lambda.sim.simulator import Simulation

ROLE = "KarpenterNodeRole-sim"


def pool(name: str, **kw) -> dict:
    return shared.nodepool(name, families=("c5", "m5"), capacity_types=("on-demand",), cpu_limit=None,
                           policy="WhenEmpty", consolidate_after="30s", **kw)


def static_pool() -> dict:
    np = pool("static")
    np["spec"]["replicas"] = 2
    return np


def web(replicas: int, pinned: bool) -> dict:
    """One pod per node (hostname anti-affinity), pinned to the static NodePool or free to go anywhere."""
    spec: dict = {"containers": [{"name": "c", "image": "nginx",
                                  "resources": {"requests": {"cpu": "1500m", "memory": "512Mi"}}}],
                  "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                      {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    if pinned:
        spec["nodeSelector"] = {"karpenter.sh/nodepool": "static"}
    return shared.workload("web", spec, replicas=replicas, namespace="default")


def scenario(scale_at_2m: bool) -> dict:
    """The EC2NodeClass's tags changed at 3m (every node drifts: NodeClassDrift); the Deployment scaled to 2 at 2m."""
    steps = [{"at": "2m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 2}}] \
        if scale_at_2m else []
    steps.append({"at": "3m", "apply": shared.nodeclass(role=ROLE, tags={"team": "x"})})
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "static-drift"},
            "spec": {"steps": steps}}


NODECLASS = shared.nodeclass(role=ROLE)
RUNS = {
    # the audit's input.yaml: pods pinned to the static NodePool, no other NodePool
    "pinned": [static_pool(), NODECLASS, web(2, pinned=True), scenario(False)],
    # a dynamic NodePool too (heavier weight): the pods, made once the static nodes are up, land on them and could go
    # either way; the replacements must still be static nodes
    "mixed": [static_pool(), pool("default", weight=10), NODECLASS, web(0, pinned=False), scenario(True)],
    # the audit's input-empty.yaml: no pod at all
    "empty": [static_pool(), NODECLASS, scenario(False)],
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request, tmp_path_factory) -> tuple[str, dict]:
    f = tmp_path_factory.mktemp("static-drift") / f"{request.param}.yaml"
    f.write_text(shared.to_yaml(*RUNS[request.param]))
    return request.param, Simulation([f], progress=lambda m: None, until=15 * 60).run().to_dict()


def of(events, typ, prefix="nodeclaim/") -> list[dict]:
    return [e for e in events if e["type"] == typ and e["object"].startswith(prefix)]


def test_every_drifted_static_nodeclaim_is_replaced_by_a_static_one_before_it_is_disrupted(run):
    name, out = run
    events = out["events"]
    original = [e["object"] for e in of(events, "NodeClaimLaunched") if e["time"] < 180]
    assert len(original) == 2 and all(o.startswith("nodeclaim/static-") for o in original)
    disrupted = of(events, "NodeClaimDisrupted")
    assert sorted(e["object"] for e in disrupted) == sorted(original)           # exactly once each
    launched = {e["object"]: e for e in of(events, "NodeClaimLaunched")}
    initialized = {e["object"]: e["time"] for e in of(events, "NodeClaimInitialized")}
    for d in disrupted:
        assert d["reason"] == "Drifted" and d["nodePool"] == "static"
        (rep,) = d["replacements"]
        r = launched[f"nodeclaim/{rep}"]
        assert rep.startswith("static-") and r["replaces"] == [d["object"].split("/", 1)[1]] and r["reason"] == "Drifted"
        assert r["time"] < initialized[r["object"]] <= d["time"]                 # launched and up before the drain
    assert len(launched) == 4                      # the 2 first, their 2 replacements: nothing else, no dynamic node
    assert not [e for e in events if e["type"] == "DisruptionBlocked" and e["reason"] != "budget"]
    assert not [e for e in disrupted if e["reason"] == "Overprovisioned"]
    assert sorted(nc["name"] for nc in out["nodeClaims"]) == sorted(r for d in disrupted for r in d["replacements"])


def test_the_static_count_never_dips_and_the_pods_are_rebound_at_once(run):
    name, out = run
    events = out["events"]
    alive: set[str] = set()
    counts = []
    for e in events:
        if not e["object"].startswith("nodeclaim/static-"):
            continue
        if e["type"] == "NodeClaimLaunched":
            alive.add(e["object"])
        elif e["type"] in ("NodeClaimDisrupted", "NodeClaimDeleted"):   # deletion requested: no longer counts
            alive.discard(e["object"])
        counts.append((e["time"], len(alive)))
    after = [c for _t, c in counts][[c for _t, c in counts].index(2):]   # once the NodePool reached its count
    assert min(after) == 2 and after[-1] == 2 and max(after) <= 4
    evicted = of(events, "PodEvicted", "pod/")
    bound = {(e["object"], e["time"]) for e in of(events, "PodBound", "pod/")}
    assert len(evicted) == (0 if name == "empty" else 2)
    assert all((e["object"], e["time"]) in bound for e in evicted)           # rebound the moment it was evicted
    assert out["stoppedBecause"].startswith("reached --until") and len(out["nodeClaims"]) == 2
    pods = {e["object"] for e in of(events, "PodBound", "pod/")}
    last = {p: max(e["time"] for e in of(events, "PodBound", "pod/") if e["object"] == p) for p in pods}
    assert all(not [e for e in of(events, "PodEvicted", "pod/") if e["object"] == p and e["time"] > t]
               for p, t in last.items())                                       # each pod ends bound
