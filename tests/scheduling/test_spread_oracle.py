"""Random spread workloads against an oracle: every placement legal, cost close to the same workload unspread."""

from __future__ import annotations

import random

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling.resources import pod_requests

from .helpers import catalog, pod, run

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
SIZES = [("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("1", "4Gi"), ("2", "2Gi"), ("1500m", "6Gi")]


def daemonset():
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "180Mi"}}}]}}}}


def workload(seed: int, spread: bool):
    """Deployments of 10-60 replicas; with ``spread`` about half get a zone spread and a quarter a hostname spread
    on top (maxSkew 1-3, DoNotSchedule or ScheduleAnyway).  The same pods either way, constraints aside."""
    r = random.Random(seed)
    pods, rules = [], {}
    for d in range(r.randint(3, 6)):
        n, (cpu, mem) = r.randint(10, 60), r.choice(SIZES)
        app = f"app{d}"
        tscs = []
        if r.random() < 0.5:
            tscs.append({"maxSkew": r.randint(1, 2), "topologyKey": L.ZONE,
                         "whenUnsatisfiable": r.choice(["DoNotSchedule", "ScheduleAnyway"]),
                         "labelSelector": {"matchLabels": {"app": app}}})
            if r.random() < 0.5:
                tscs.append({"maxSkew": r.randint(4, 12), "topologyKey": L.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                             "labelSelector": {"matchLabels": {"app": app}}})
        if spread and tscs:
            rules[app] = tscs
        extra = {"topologySpreadConstraints": tscs} if spread and tscs else {}
        pods += [pod(f"{app}-{i}", cpu=cpu, memory=mem, labels={"app": app}, **extra) for i in range(n)]
    return pods, rules


def check_legal(res, pods, rules, types, ds):
    by_key = {f"default/{p['metadata']['name']}": p for p in pods}
    ds_req = pod_requests(ds["spec"]["template"]) if ds else {}
    type_of = {t.name: t for t in types}
    per_zone: dict = {}
    for n in res.nodeclaims:
        t = type_of[n.instance_type]
        assert n.zone in ZONES and any(o.zone == n.zone for o in t.offerings)
        assert n.requirements.get(L.ZONE).has(n.zone)
        used: dict = dict(ds_req)
        per_node: dict = {}
        for k in n.pods:
            for rname, v in pod_requests(by_key[k]).items():
                used[rname] = used.get(rname, 0) + v
            app = by_key[k]["metadata"]["labels"]["app"]
            per_zone.setdefault(app, {}).setdefault(n.zone, 0)
            per_zone[app][n.zone] += 1
            per_node[app] = per_node.get(app, 0) + 1
        for rname in ("cpu", "memory"):
            assert used.get(rname, 0) <= t.allocatable[rname], (n.name, n.instance_type, rname, used, t.allocatable)
        assert len(n.pods) + (1 if ds else 0) <= t.allocatable["pods"]
        for app, k in per_node.items():
            for c in rules.get(app, ()):
                if c["topologyKey"] == L.HOSTNAME:
                    assert k <= c["maxSkew"], (n.name, app, k)
    for app, tscs in rules.items():
        for c in tscs:
            if c["topologyKey"] == L.ZONE and c["whenUnsatisfiable"] == "DoNotSchedule":
                counts = [per_zone.get(app, {}).get(z, 0) for z in ZONES]
                assert max(counts) - min(counts) <= c["maxSkew"], (app, counts, c)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("with_ds", [True, False])
def test_random_spread_workloads_are_legal_and_cost_little_more_than_unspread(seed, with_ds):
    types = catalog()
    ds = daemonset() if with_ds else None
    dss = [ds] if ds else []
    spread_pods, rules = workload(seed, spread=True)
    plain_pods, _ = workload(seed, spread=False)
    spread = run(spread_pods, types=types, daemonsets=dss)
    plain = run(plain_pods, types=types, daemonsets=dss)
    assert not spread.unschedulable and not plain.unschedulable
    check_legal(spread, spread_pods, rules, types, ds)
    check_legal(plain, plain_pods, {}, types, ds)
    assert spread.cost_per_hour <= 1.15 * plain.cost_per_hour, (spread.cost_per_hour, plain.cost_per_hour, rules.keys())


def test_a_spread_counts_the_pods_of_another_workload_it_selects_placed_before_it():
    """Karpenter's queue places larger pods first and records each: a DoNotSchedule zone spread over ``app=web``
    counts the pods of another Deployment it selects (with no constraints of its own) wherever they went.  Three 1-CPU
    ``web-a`` pods pinned to zone a come first; the three 400m spreading ``web-c`` pods then keep every placement's skew
    within 1 -- none in zone a (before, the unconstrained class was bulk-packed last: a=4, b=1, c=1)."""
    from karpenter_lambda.api import labels as L

    from .helpers import node_of, pod, run

    zone_a = [pod(f"web-a-{i}", cpu="1", memory="1Gi", labels={"app": "web", "version": "a"}, owner="web-a",
                  nodeSelector={L.ZONE: "us-east-1a"}) for i in range(3)]
    spread = {"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    web_c = [pod(f"web-c-{i}", cpu="400m", memory="512Mi", labels={"app": "web", "version": "c"}, owner="web-c",
                 topologySpreadConstraints=[spread]) for i in range(3)]
    res = run(zone_a + web_c)
    assert not res.unschedulable
    zones = {}
    for p in zone_a + web_c:
        key = f"default/{p['metadata']['name']}"
        zones[key] = node_of(res, key).zone
    assert {zones[f"default/web-a-{i}"] for i in range(3)} == {"us-east-1a"}
    c_zones = [zones[f"default/web-c-{i}"] for i in range(3)]
    assert "us-east-1a" not in c_zones and sorted(c_zones).count("us-east-1b") + sorted(c_zones).count("us-east-1c") == 3
