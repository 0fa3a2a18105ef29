"""Pods arriving one at a time while a node boots: each later round counts the pods earlier rounds nominated to the
in-flight NodeClaim (docs/provisioning.md, "Nominations").

The auditor's reproduction: a NodePool of m5 only (an m5.large has 1930m allocatable), pod a (1 CPU) at 0 s, b (900m)
at 10 s, c (900m) at 12 s, d (900m) at 14 s.  Before the fix b, c and d were all nominated to a's booting m5.large
(3.7 CPU on 1.93) and the second NodeClaim was launched only after that node joined (32 s).  Expected, as Karpenter
(which re-solves every pending pod each round, in-flight NodeClaims as capacity): a and b fill the first node, c gets
a new NodeClaim at once (13 s), d joins c."""

import textwrap

from manifests import m5_on_demand_pool as M5_POOL

from karpenter_lambda.api.quantity import parse_resource_list
from karpenter_lambda.sim.simulator import Simulation

CPU_M = {"a": 1000, "b": 900, "c": 900, "d": 900}


def _pod(name: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, namespace: default}}
        spec:
          containers:
            - {{name: c, image: x, resources: {{requests: {{cpu: {CPU_M[name]}m}}}}}}
        """)


def _step(at: str, name: str) -> str:
    return f"  - at: {at}\n    apply:\n" + textwrap.indent(_pod(name), "      ")


SCENARIO = M5_POOL("sim") + "---\n" + _pod("a") + textwrap.dedent("""\
    ---
    apiVersion: karpenter-lambda.io/v1alpha1
    kind: Scenario
    metadata: {name: one-at-a-time}
    spec:
      steps:
    """) + _step("10s", "b") + _step("12s", "c") + _step("14s", "d")


def test_pods_arriving_one_at_a_time_do_not_overfill_a_booting_node(tmp_path):
    path = tmp_path / "one-at-a-time.yaml"
    path.write_text(SCENARIO)
    target: dict[str, str] = {}     # pod -> what its latest Nominated event names ("nodeclaim/X" or "node/N")
    bound: set[str] = set()
    overfull: list[str] = []

    def check(ev) -> None:
        if ev.type == "PodBound":
            bound.add(ev.object.removeprefix("pod/default/"))
        if ev.type != "PodNominated":
            return
        for key in ev.extra["pods"]:    # one event may name several pods ("2 pods: Pod should schedule on: ...")
            target[key.removeprefix("default/")] = ev.message.rsplit(" ", 1)[-1]
        # every in-flight NodeClaim: the pending pods nominated to it fit its allocatable
        for nc in sim.store.list("NodeClaim"):
            if nc.is_true("Initialized") or not nc.status.get("allocatable"):
                continue
            names = {f"nodeclaim/{nc.name}"} | ({f"node/{nc.status['nodeName']}"} if nc.status.get("nodeName") else set())
            pods = sorted(p for p, t in target.items() if t in names and p not in bound)
            alloc = parse_resource_list(nc.status["allocatable"])["cpu"]
            if sum(CPU_M[p] for p in pods) > alloc:
                overfull.append(f"{ev.time:.0f}s: {nc.name} ({alloc}m) nominated {pods}")

    sim = Simulation([path], until=180.0, progress=lambda m: None, on_event=check)
    result = sim.run()
    events = result.events

    assert overfull == [], overfull
    assert result.pods_bound == result.pods_total == 4 and result.unschedulable == []
    joined = min(e.time for e in events if e.type == "NodeJoined")
    first = {e.object: e.time for e in reversed(events) if e.type == "NodeClaimLaunched"}
    assert len(first) == 2, [e.to_dict() for e in events if e.type == "NodeClaimLaunched"]
    nominated = {}
    for e in events:
        if e.type == "PodNominated":
            for key in e.extra["pods"]:
                nominated.setdefault(key.removeprefix("default/"), (e.time, e.message.rsplit(" ", 1)[-1]))
    (t_a, x), (t_b, b_to), (t_c, y) = nominated["a"], nominated["b"], nominated["c"]
    assert b_to == x, "b fits the room a's NodeClaim has left"
    assert y != x and y.startswith("nodeclaim/"), "c must get a new NodeClaim: a's has room for a and b only"
    assert t_c <= 15.0 and t_c + 10.0 < joined, (t_c, joined)
    assert first[y] == t_c   # launched in the round c arrived in, not after the first node joined
