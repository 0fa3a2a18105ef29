#!/usr/bin/env python
"""Consolidation benchmark: one consolidation sweep's decisions on a fragmented cluster, as the Lambda makes them.

    python bench/consolidation.py [--nodes 1000] [--pods 20000] [--budget 10%] [--sweeps 1] [--blockers few|heavy]
                                  [--json] [--seed 7]

The cluster (a documented, seeded generator, ``make_cluster``): ``--nodes`` on-demand nodes of eight common
general/compute/memory types (m5/m6i xlarge-2xlarge, c5 xlarge-2xlarge, r5 large-xlarge) spread over three zones,
and ``--pods`` pods in Deployments of 10: CPU from {50,100,200,250,500}m, memory from {128,256,512,1024}Mi; 10% of
the Deployments spread over zones (maxSkew 1, DoNotSchedule), 8% keep one pod per node (required hostname
anti-affinity); blockers (``--blockers``, the same cluster either way): ``few`` (default, "a few do-not-disrupt pods
and PDBs"): 0.1% of the pods carry ``karpenter.sh/do-not-disrupt``, 1% of the Deployments have a PDB, a quarter of
them maxUnavailable 0 and the others maxUnavailable 1; ``heavy`` (the default before 2026-12-04): 0.5% of the pods
do-not-disrupt, 1% of the Deployments with a PDB at maxUnavailable 0.  A node holding a do-not-disrupt pod, or a pod
of a Deployment whose PDB allows no eviction, can never be consolidated (``graceful_blockers``; with seed 7: ``few``
62 of the 1,000 nodes, $17.57/h; ``heavy`` 236 nodes, 85 do-not-disrupt and 151 PDB, $68.34/h);
``lower_bound_cost_with_blocked`` keeps them.  Pods are placed at random (a fit within 20 random tries, else the first fit), so nodes are
half used: a fragmented cluster.  The catalog is the real us-east-1 one (moto's EC2 data, bundled prices).

Timed: ``plan_sweep`` over the snapshot with the consolidation sweep's methods (emptiness, multi-node,
single-node) and the NodePool budget (``--budget``, Karpenter's default 10%), i.e. the pure decision the Lambda
makes after loading its snapshot.  JSON keys (a contract): ``nodes_before``, ``nodes_after``, ``cost_before``,
``cost_after``, ``lower_bound_cost`` (the fit-aware LP bound of bench/scheduling.py over all pods), ``seconds``,
``peak_rss_mb``, ``moves`` (commands), plus ``nodes_disrupted``, ``replacements``, ``savings_per_hour``,
``method``, ``blocked`` (per cause), ``cost_vs_bound_after``; with ``--sweeps N`` the decisions are carried out on
the snapshot (pods where the scheduler put them) and the next sweep runs: ``later_sweeps`` (seconds, nodes, cost,
moves per sweep) and ``cost_vs_bound_final``.  ``lower_bound_cost_with_blocked``: the nodes blocked for good
(``blocked_for_good``, ``blocked_for_good_cost``) kept and paid, plus the fit-aware LP bound of every other pod,
which may also use the blocked nodes' free room at no price (a lower bound on any cluster valid consolidation can
reach); ``lower_bound_cost_with_blocked_naive`` the same without that room; ``ratio_to_bound_with_blocked`` the
final cost over it (``cost_vs_bound_with_blocked_after``: one sweep's ``cost_after`` over it); ``decisions_sha256``: a digest of every sweep's decisions (equal when two code versions decide the same).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))
sys.path.insert(0, HERE)

from karpenter_lambda.api import labels as L  # noqa: E402
from karpenter_lambda.api.objects import NodeClaim, NodePool  # noqa: E402
from karpenter_lambda.api.snapshot import ClusterSnapshot  # noqa: E402

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
NODE_TYPES = ["m5.xlarge", "m5.2xlarge", "m6i.xlarge", "m6i.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.large", "r5.xlarge"]
CPU = [50, 100, 200, 250, 500]
MEM = [128, 256, 512, 1024]
T0 = 1_796_000_000.0   # a fixed virtual "now"
OLD = "2026-11-01T00:00:00Z"


def nodepool(budget: str) -> NodePool:
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                     "spec": {"template": {"spec": {
                         "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                                          {"key": L.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]}],
                         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                         "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                        "budgets": [{"nodes": budget}]}}})


def _price(it, zone):
    return min(o.price for o in it.offerings if o.zone == zone and o.capacity_type == "on-demand")


def _add_node(snap, name: str, zone: str, it, price: float) -> None:
    labels = {**it.labels, L.ZONE: zone, L.CAPACITY_TYPE: "on-demand", L.NODEPOOL: "default", L.HOSTNAME: name,
              L.INSTANCE_TYPE: it.name, L.NODE_INITIALIZED: "true", L.NODE_REGISTERED: "true"}
    pid = f"aws:///{zone}/i-{name}"
    a = it.allocatable
    snap.nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                       "spec": {"providerID": pid},
                       "status": {"allocatable": {"cpu": f"{a['cpu']}m", "memory": str(a["memory"]), "pods": str(a.get("pods", 58))},
                                  "conditions": [{"type": "Ready", "status": "True"}]}})
    snap.nodeclaims[f"nc-{name}"] = NodeClaim({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": f"nc-{name}", "labels": labels, "creationTimestamp": OLD,
                     "annotations": {"karpenter-lambda.io/price-per-hour": repr(price)}},
        "spec": {"expireAfter": "720h"},
        "status": {"providerID": pid, "nodeName": name, "lastPodEventTime": OLD,
                   "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": OLD}]}})


# blockers (shares): pods with karpenter.sh/do-not-disrupt, Deployments with a PDB allowing no eviction
# (maxUnavailable 0) and with a PDB allowing one (maxUnavailable 1).  ``HEAVY_BLOCKERS``: the shares before
# 2026-12-04 (a quarter of the nodes blocked for good), kept as ``--blockers heavy``.
BLOCKERS = {"few": (0.001, 0.0025, 0.0075), "heavy": (0.005, 0.01, 0.0)}


def make_cluster(types, n_nodes: int, n_pods: int, seed: int, budget: str, blockers: str = "few"):
    dnd, pdb_zero, pdb_one = BLOCKERS[blockers]
    r = random.Random(seed)
    by_name = {t.name: t for t in types}
    snap = ClusterSnapshot(now=T0, nodepools={"default": nodepool(budget)})
    nodes = []   # [name, zone, it, cpu_left, mem_left, pods_left, apps]
    for i in range(n_nodes):
        it = by_name[r.choice(NODE_TYPES)]
        zone = ZONES[i % 3]
        name = f"node-{i:04d}"
        a = it.allocatable
        nodes.append([name, zone, it, a["cpu"], a["memory"], a.get("pods", 58), set()])
    pods, pdbs = [], []
    n_deploy = n_pods // 10
    for dnum in range(n_deploy):
        kind = r.random()
        app = f"app-{dnum}"
        spec_extra = {}
        if kind < 0.10:
            spec_extra = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                         "labelSelector": {"matchLabels": {"app": app}}}]}
        elif kind < 0.18:
            spec_extra = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": L.HOSTNAME}]}}}
        u = r.random()   # one draw per Deployment whatever the shares: the cluster is the same, only the PDBs differ
        if u < pdb_zero + pdb_one:
            pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": {"name": app, "namespace": "default"},
                         "spec": {"maxUnavailable": 0 if u < pdb_zero else 1, "selector": {"matchLabels": {"app": app}}}})
        cpu, mem = r.choice(CPU), r.choice(MEM)
        for k in range(10):
            ann = {L.DO_NOT_DISRUPT: "true"} if r.random() < dnd else {}
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{app}-{k}", "namespace": "default", "uid": f"u-{dnum}-{k}",
                                "labels": {"app": app}, "annotations": ann, "creationTimestamp": OLD,
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "uid": f"rs-{dnum}"}]},
                   "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {
                       "cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}], **spec_extra},
                   "status": {"phase": "Running", "startTime": OLD, "conditions": [
                       {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True", "lastTransitionTime": OLD}]}}
            want_zone = ZONES[k % 3] if "topologySpreadConstraints" in spec_extra else None
            anti = "affinity" in spec_extra

            def ok(nd):
                return (nd[3] >= cpu and nd[4] >= mem * 2**20 and nd[5] >= 1 and (want_zone is None or nd[1] == want_zone)
                        and not (anti and app in nd[6]))
            choice = next((nd for nd in (r.choice(nodes) for _ in range(20)) if ok(nd)), None) or next((nd for nd in nodes if ok(nd)), None)
            if choice is None:
                continue
            choice[3] -= cpu
            choice[4] -= mem * 2**20
            choice[5] -= 1
            choice[6].add(app)
            pod["spec"]["nodeName"] = choice[0]
            pods.append(pod)
    for name, zone, it, *_ in nodes:
        _add_node(snap, name, zone, it, _price(it, zone))
    snap.pods, snap.pdbs = pods, pdbs
    snap.instance_types = {"default": [t for t in types if t.labels.get(L.INSTANCE_CATEGORY) in ("c", "m", "r")]}
    return snap


def apply_commands(snap, plan, types_by_name, n_new: list):
    """Carry a sweep's commands out as the Lambda does, then let the cluster settle: each command re-validated
    (``plan.revalidate``, the executor's second look) in the order it was planned, on the snapshot with the
    commands before it carried out (``apply_option``: pods where the validity test put them, the replacement a new
    node); a command that no longer holds is cancelled.  Then the replacements come up (initialized nodes that may
    receive pods and be consolidated later).  Returns (the new snapshot, cancelled count)."""
    from karpenter_lambda.controllers.disrupt import METHOD_BY_REASON
    from karpenter_lambda.disruption.consolidation import PLANNED_PREFIX, PLANNED_TAINT
    from karpenter_lambda.disruption.plan import SweepBudgets, revalidate

    view, cancelled, caches = snap, 0, None
    for cmd in plan.commands:
        planned = round(sum(p.price for p in cmd.replacements), 6) if cmd.replacements else None
        ctx = SweepBudgets(view, {}, caches=caches)
        now, why = revalidate(view, METHOD_BY_REASON[cmd.reason], cmd.names, ctx, planned_price=planned)
        if now is None or now.option is None:
            cancelled += 1
            continue
        after = ctx.derive(now.option)   # apply_option, with the caches that still hold (as the executor does)
        view, caches = after.snapshot, after.caches
    for nc in list(view.nodeclaims.values()):   # the replacements initialize: ordinary nodes from now on
        if not nc.name.startswith(PLANNED_PREFIX):
            continue
        n_new[0] += 1
        node = view.node_of_nodeclaim(nc.name)
        it = types_by_name[nc.labels[L.INSTANCE_TYPE]]
        name = f"new-{n_new[0]:04d}"
        _add_node(view, name, nc.labels[L.ZONE], it, float(nc.annotations["karpenter-lambda.io/price-per-hour"]))
        old = node["metadata"]["name"]
        view.nodes = [n for n in view.nodes if n["metadata"]["name"] != old]
        view.nodeclaims.pop(nc.name)
        view.pods = [({**p, "spec": {**p["spec"], "nodeName": name}} if p["spec"].get("nodeName") == old else p)
                     for p in view.pods]
        assert PLANNED_TAINT not in (view.nodes[-1].get("spec") or {}).get("taints", [])
    for attr in ("node_by_name", "pods_by_uid", "pods_by_node", "_claim_by_node", "_node_by_claim", "reserved_by_claim"):
        view.__dict__.pop(attr, None)
    return view, cancelled


def blocked_for_good(snap) -> list:
    """The candidates no consolidation may ever take: a blocker from ``graceful_blockers`` that does not lapse with
    time (a node's or a pod's ``karpenter.sh/do-not-disrupt: "true"``, a PDB that allows no eviction; a
    do-not-disrupt duration or a consolidateAfter window lapses and is not counted)."""
    from karpenter_lambda.disruption.candidates import build_candidates, graceful_blockers
    from karpenter_lambda.disruption.plan import SweepBudgets

    cands, _ = build_candidates(snap)
    ctx = SweepBudgets(snap, {})   # its caches: the PDB index computed once
    out = []
    for c in cands:
        why = graceful_blockers(c, snap, ctx=ctx)
        if why and all(cause in ("do-not-disrupt", "PDB") and "left)" not in msg for cause, msg in why):
            out.append(c)
    return out


def fit_lower_bound_with_blocked(types, snap, blocked) -> dict:
    """The fit-aware LP bound (bench/scheduling.py's ``fit_lower_bound``) of the pods that can move, with the nodes
    blocked for good kept and paid: ``naive`` = their cost + the LP bound of the other pods on new capacity;
    ``spare`` = their cost + the same LP where each blocked node's free room (allocatable minus its own pods'
    requests) is also offered to those pods at no price -- a true lower bound on any cluster reachable by valid
    consolidation (it is <= ``naive``).  None values without scipy."""
    from scheduling import fit_lower_bound, undominated

    from karpenter_lambda.api.kube import node_allocatable
    from karpenter_lambda.scheduling.resources import pod_requests

    blocked_nodes = {c.node_name for c in blocked}
    vectors: dict = {}
    for p in snap.pods:
        if (p.get("spec") or {}).get("nodeName") in blocked_nodes:
            continue
        req = pod_requests(p)
        v = (req.get("cpu", 0), req.get("memory", 0))
        vectors[v] = vectors.get(v, 0) + 1
    fixed = sum(c.price for c in blocked)
    naive = fit_lower_bound(types, vectors) if vectors else 0.0
    try:
        import numpy as np
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix
    except ImportError:
        return {"naive": None if naive is None else naive + fixed, "spare": None, "fixed": fixed}
    vecs = list(vectors)
    bins = []   # (cpu, MiB, pod slots) free on each blocked node
    for c in blocked:
        a = node_allocatable(c.node)
        used = [0, 0, 0]
        for p in c.pods:
            r = pod_requests(p)
            used[0] += r.get("cpu", 0)
            used[1] += r.get("memory", 0)
            used[2] += 1
        bins.append((a.get("cpu", 0) - used[0], (a.get("memory", 0) - used[1]) / 2**20, a.get("pods", 0) - used[2]))
    items = []
    for t in types:
        a, o = t.allocatable, t.cheapest_offering()
        if o and a.get("cpu", 0) > 0 and a.get("memory", 0) > 0 and a.get("pods", 0) > 0:
            fits = [j for j, (cc, m) in enumerate(vecs) if cc <= a["cpu"] and m <= a["memory"]]
            if fits:
                items.append((a["cpu"], a["memory"] / 2**20, a["pods"], o.price, fits))
    items = undominated(items)   # exact: the LP's optimum is the same without dominated types
    nt = len(items)
    cost, rows, cols, vals, eq_rows, eq_cols, b_ub = [], [], [], [], [], [], []
    for ti, (cc, m, pp, price, _f) in enumerate(items):
        cost.append(price)
        for r, cap in enumerate((cc, m, pp)):
            rows.append(3 * ti + r)
            cols.append(ti)
            vals.append(-cap)
        b_ub.extend([0.0, 0.0, 0.0])
    col = nt
    for ti, (_c, _m, _p, _price, fits) in enumerate(items):
        for j in fits:
            cost.append(0.0)
            vc, vm = vecs[j]
            for r, v in enumerate((vc, vm / 2**20, 1)):
                rows.append(3 * ti + r)
                cols.append(col)
                vals.append(v)
            eq_rows.append(j)
            eq_cols.append(col)
            col += 1
    row = 3 * nt
    for bc, bm, bp in bins:   # a blocked node's free room: no price, its own capacity
        if bc <= 0 or bm <= 0 or bp <= 0:
            continue
        for j, (vc, vm) in enumerate(vecs):
            if vc > bc or vm / 2**20 > bm:
                continue
            cost.append(0.0)
            for r, v in enumerate((vc, vm / 2**20, 1)):
                rows.append(row + r)
                cols.append(col)
                vals.append(v)
            eq_rows.append(j)
            eq_cols.append(col)
            col += 1
        b_ub.extend([float(bc), float(bm), float(bp)])
        row += 3
    a_ub = coo_matrix((vals, (rows, cols)), shape=(row, col)).tocsr()
    a_eq = coo_matrix(([1.0] * len(eq_rows), (eq_rows, eq_cols)), shape=(len(vecs), col)).tocsr()
    res = linprog(np.array(cost), A_ub=a_ub, b_ub=np.array(b_ub), A_eq=a_eq,
                  b_eq=np.array([float(vectors[v]) for v in vecs]), bounds=(0, None), method="highs")
    spare = float(res.fun) + fixed if res.status == 0 else None
    return {"naive": None if naive is None else naive + fixed, "spare": spare, "fixed": fixed}


def decisions_digest(plans: list) -> str:
    """sha256 of every sweep's decisions (reason, candidates, replacements with their pods, savings, blocked causes):
    two code versions that make the same decisions give the same digest (the refactor check of issue 22)."""
    import hashlib
    import json as _json
    rows = []
    for p in plans:
        rows.append({
            "commands": [{"reason": c.reason, "candidates": c.names, "savings": round(c.savings_per_hour, 6),
                          "replacements": [r.to_dict() for r in c.replacements]} for c in p.commands],
            "blocked": sorted([b.nodeclaim, b.cause, b.reason] for b in p.blocked)})
    return hashlib.sha256(_json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def _cost(snap) -> float:
    return sum(float(nc.annotations["karpenter-lambda.io/price-per-hour"]) for nc in snap.nodeclaims.values())


def run(a) -> dict:
    from scheduling import fit_lower_bound, real_catalog

    from karpenter_lambda.catalog.types import InstanceType
    from karpenter_lambda.controllers.disrupt import SWEEP_METHODS
    from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep
    from karpenter_lambda.scheduling.resources import pod_requests

    types = real_catalog()
    snap = make_cluster(types, a.nodes, a.pods, a.seed, a.budget, a.blockers)
    first = snap   # the bound with the blocked nodes is taken on the cluster as generated (their own pods only)
    cost_before = sum(float(nc.annotations["karpenter-lambda.io/price-per-hour"]) for nc in snap.nodeclaims.values())
    nodes_before, pods_total = len(snap.nodeclaims), len(snap.pods)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    plan = plan_sweep(snap, list(SWEEP_METHODS["consolidation"]), SweepBudgets(snap, {}))
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    disrupted = [c for cmd in plan.commands for c in cmd.candidates]
    replacements = [p for cmd in plan.commands for p in cmd.replacements]
    savings = sum(cmd.savings_per_hour for cmd in plan.commands)
    later = []   # --sweeps N: the decisions carried out, then the next sweep on the result
    by_name = {t.name: t for t in types}
    n_new = [0]
    current = plan
    plans = [plan]
    cancelled = 0
    sweep_seconds = [round(seconds, 3)]

    def progress(i, p, secs):   # long runs (--sweeps N) say where they are, on stderr
        if a.sweeps > 1:
            print(f"sweep {i}/{a.sweeps}: {secs:.1f} s, {len(p.commands)} command(s), "
                  f"${sum(c.savings_per_hour for c in p.commands):.2f}/h saved", file=sys.stderr, flush=True)
    progress(1, plan, seconds)
    for _ in range(max(0, a.sweeps - 1)):
        if not current.commands:
            break
        snap, c = apply_commands(snap, current, by_name, n_new)
        cancelled += c
        gc.collect()
        t1 = time.perf_counter()
        current = plan_sweep(snap, list(SWEEP_METHODS["consolidation"]), SweepBudgets(snap, {}))
        plans.append(current)
        sweep_seconds.append(round(time.perf_counter() - t1, 3))
        progress(len(sweep_seconds), current, sweep_seconds[-1])
        later.append({"seconds": sweep_seconds[-1], "nodes": len(snap.nodeclaims), "cost": round(_cost(snap), 4),
                      "moves": len(current.commands), "nodes_disrupted": sum(len(c.candidates) for c in current.commands),
                      "method": sorted({f"{c.reason}/{len(c.candidates)}-node" for c in current.commands})})
    if later and current.commands:
        snap, c = apply_commands(snap, current, by_name, n_new)
        cancelled += c
        later.append({"nodes": len(snap.nodeclaims), "cost": round(_cost(snap), 4)})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    vectors: dict = {}
    for p in snap.pods:
        req = pod_requests(p)
        v = (req.get("cpu", 0), req.get("memory", 0))
        vectors[v] = vectors.get(v, 0) + 1
    od = [InstanceType(t.name, t.labels, t.capacity, t.overhead, [o for o in t.offerings if o.capacity_type == "on-demand"])
          for t in snap.instance_types["default"]]
    bound = fit_lower_bound(od, vectors)
    blocked_nodes = blocked_for_good(first)
    wb = fit_lower_bound_with_blocked(od, first, blocked_nodes)
    causes: dict = {}
    for b in plan.blocked:
        causes[b.cause] = causes.get(b.cause, 0) + 1
    cost_after = cost_before - savings
    return {
        "nodes_before": nodes_before, "pods": pods_total,
        "nodes_after": nodes_before - len(disrupted) + len(replacements),
        "cost_before": round(cost_before, 4), "cost_after": round(cost_after, 4),
        "lower_bound_cost": round(bound, 4) if bound else None,
        "cost_vs_bound_after": round(cost_after / bound, 4) if bound else None,
        "seconds": round(seconds, 3), "cpu_seconds": round(cpu_seconds, 3), "peak_rss_mb": round(rss, 1),
        "moves": len(plan.commands), "nodes_disrupted": len(disrupted), "replacements": len(replacements),
        "savings_per_hour": round(savings, 4),
        "method": sorted({cmd.reason + (f"/{len(cmd.candidates)}-node" if cmd.candidates else "") for cmd in plan.commands}),
        "blocked": causes, "budget": a.budget, "seed": a.seed, "blockers": a.blockers,
        "later_sweeps": later,
        "cost_vs_bound_final": round(later[-1]["cost"] / bound, 4) if later and bound else None,
        # with --sweeps N: how many sweeps ran, the cluster they lead to, per-sweep decision times
        "sweeps": len(sweep_seconds), "sweep_seconds": sweep_seconds, "max_sweep_seconds": max(sweep_seconds),
        "nodes_final": len(snap.nodeclaims), "cost_final": round(_cost(snap), 4),
        "ratio_to_bound": round(_cost(snap) / bound, 4) if bound else None, "cancelled": cancelled,
        # the nodes no consolidation may ever take (do-not-disrupt, PDB at 0) kept and paid, their spare room
        # offered to the other pods: the bound a valid consolidation can approach (``naive``: without that room)
        "blocked_for_good": len(blocked_nodes), "blocked_for_good_cost": round(wb["fixed"], 4),
        "lower_bound_cost_with_blocked": round(wb["spare"], 4) if wb["spare"] else None,
        "ratio_to_bound_with_blocked": round(_cost(snap) / wb["spare"], 4) if wb["spare"] else None,
        "cost_vs_bound_with_blocked_after": round(cost_after / wb["spare"], 4) if wb["spare"] else None,
        "lower_bound_cost_with_blocked_naive": round(wb["naive"], 4) if wb["naive"] else None,
        # sha256 of every sweep's decisions (decisions_digest): equal before and after a refactor
        "decisions_sha256": decisions_digest(plans),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--budget", default="10%", help="the NodePool's disruption budget (default 10%%, Karpenter's)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--blockers", choices=sorted(BLOCKERS), default="few",
                    help="few (default): 0.1%% of pods do-not-disrupt, PDBs on 1%% of Deployments (a quarter of them "
                         "maxUnavailable 0); heavy: 0.5%% do-not-disrupt, 1%% of Deployments with maxUnavailable 0")
    ap.add_argument("--sweeps", type=int, default=1, help="carry each sweep's decisions out and run the next (default 1)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    row = run(a)
    if a.json:
        print(json.dumps(row), flush=True)
    else:
        print(f"{row['nodes_before']} nodes / {row['pods']} pods: {row['moves']} move(s) {row['method']}, "
              f"{row['nodes_disrupted']} nodes disrupted, {row['replacements']} replacement(s); "
              f"${row['cost_before']:.2f}/h -> ${row['cost_after']:.2f}/h (bound ${row['lower_bound_cost']}); "
              f"{row['seconds']}s, {row['peak_rss_mb']} MB")
    return row


if __name__ == "__main__":
    main()
