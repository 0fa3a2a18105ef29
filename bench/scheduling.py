#!/usr/bin/env python
"""Scheduling benchmark: Karpenter's scheduling_benchmark_test.go mix against 400+ instance types.

    python bench/scheduling.py [--pods N ...] [--json] [--mix karpenter|generic|spread]
                               [--catalog karpenter|real|synthetic|auto] [--no-fit-bound]

Mix "karpenter" (Karpenter's makeDiversePods): pods split in sixths over generic, zone spread, hostname
spread, hostname self-affinity, zone affinity and hostname anti-affinity (remainder generic); CPU from
{100,250,500,1000,1500}m and memory from {100,256,512,1024,2048,4096}Mi, seeded RNG (42).  Mix "generic":
generic pods only (the cost-vs-LP-bound check).  Mix "spread": Deployments of 5-200 replicas (one request
vector each), 30% of them with zone topology spread and 10% with hostname spread (maxSkew 1, DoNotSchedule).

Instance types (``--catalog``): "karpenter" (default) has the facts of Karpenter's fake.InstanceTypes(400),
the catalog Karpenter's own benchmark and published figures use; "real" is karpenter_lambda.catalog over
moto's bundled EC2 data for us-east-1 (zones a..c, bundled on-demand prices, estimated spot: 1,334 Linux
types); "synthetic" is a generator of 436 AWS-like types; "auto" is real, else synthetic.  The JSON says
which (``catalog``).  Only ``solve()`` is timed (``seconds`` wall, ``cpu_seconds`` process CPU).

Bounds: ``lower_bound_cost_per_hour`` is the issue's LP bound (cheapest fractional mix of on-demand types
covering total CPU and memory over allocatable); ``fit_lower_bound_cost_per_hour`` is the same LP with
pods kept apart by request vector, each only on types it fits (pod slots counted): still a lower bound on
any packing, but one that cannot buy CPU from a type whose memory holds no pod.  It needs scipy and is
computed after every timed solve.
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

from karpenter_lambda.api import labels as L  # noqa: E402
from karpenter_lambda.api.objects import NodePool  # noqa: E402
from karpenter_lambda.catalog.types import InstanceType, Offering  # noqa: E402
from karpenter_lambda.scheduling import NodePoolInput, SchedulingInput, solve  # noqa: E402

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
KZONES = ["test-zone-1", "test-zone-2", "test-zone-3"]
CPU = [100, 250, 500, 1000, 1500]
MEM = [100, 256, 512, 1024, 2048, 4096]
LABEL_VALUES = ["a", "b", "c", "d", "e", "f", "g"]


# ------------------------------------------------------------------------------------------------ catalog
def real_catalog():
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    import boto3  # noqa: F401
    from moto import mock_aws

    from karpenter_lambda.adapters.aws.ec2_catalog import load_catalog

    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        types = load_catalog(ec2, "us-east-1", zones=ZONES)
    return [t for t in types if t.labels.get(L.OS, "linux") == "linux"]


def synthetic_catalog():
    """400+ types: families x sizes with AWS-like ratios and prices, amd64 + arm64, on-demand + spot in 3 zones."""
    fams = [  # family, GiB per vCPU, $ per vCPU-hour, arch
        ("m5", 4, 0.048, "amd64"), ("m6i", 4, 0.048, "amd64"), ("m7i", 4, 0.0504, "amd64"), ("m6a", 4, 0.0432, "amd64"),
        ("m7a", 4, 0.05796, "amd64"), ("m6g", 4, 0.0385, "arm64"), ("m7g", 4, 0.0408, "arm64"),
        ("c5", 2, 0.0425, "amd64"), ("c6i", 2, 0.0425, "amd64"), ("c7i", 2, 0.04463, "amd64"), ("c6a", 2, 0.03825, "amd64"),
        ("c7a", 2, 0.05131, "amd64"), ("c6g", 2, 0.034, "arm64"), ("c7g", 2, 0.03625, "arm64"),
        ("r5", 8, 0.063, "amd64"), ("r6i", 8, 0.063, "amd64"), ("r7i", 8, 0.06615, "amd64"), ("r6a", 8, 0.0567, "amd64"),
        ("r7a", 8, 0.07608, "amd64"), ("r6g", 8, 0.0504, "arm64"), ("r7g", 8, 0.05355, "arm64"),
        ("m5d", 4, 0.0565, "amd64"), ("c5d", 2, 0.048, "amd64"), ("r5d", 8, 0.072, "amd64"), ("m6id", 4, 0.05933, "amd64"),
        ("c6id", 2, 0.05040, "amd64"), ("r6id", 8, 0.0756, "amd64"), ("m6gd", 4, 0.0452, "arm64"), ("c6gd", 2, 0.0384, "arm64"),
        ("r6gd", 8, 0.0576, "arm64"), ("m5n", 4, 0.0595, "amd64"), ("c5n", 2.625, 0.054, "amd64"), ("r5n", 8, 0.0745, "amd64"),
        ("x2gd", 16, 0.0835, "arm64"), ("z1d", 8, 0.093, "amd64"), ("i3", 7.625, 0.078, "amd64"), ("i4i", 8, 0.0858, "amd64"),
    ]
    sizes = [("medium", 1), ("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16), ("8xlarge", 32), ("12xlarge", 48),
             ("16xlarge", 64), ("24xlarge", 96), ("32xlarge", 128), ("48xlarge", 192)]
    out = []
    for fam, ratio, per, arch in fams:
        for size, v in sizes:
            out.append(_mk(f"{fam}.{size}", v, v * ratio, v * per, arch))
    for size, v, m, p in (("nano", 2, 0.5, 0.0052), ("micro", 2, 1, 0.0104), ("small", 2, 2, 0.0208), ("medium", 2, 4, 0.0416),
                          ("large", 2, 8, 0.0832), ("xlarge", 4, 16, 0.1664), ("2xlarge", 8, 32, 0.3328)):
        for fam, f, arch in (("t3", 1.0, "amd64"), ("t3a", 0.9, "amd64"), ("t4g", 0.8, "arm64")):
            out.append(_mk(f"{fam}.{size}", v, m, p * f, arch))
    for name, v, m, p, g in (("g4dn.xlarge", 4, 16, 0.526, 1), ("g4dn.2xlarge", 8, 32, 0.752, 1), ("g4dn.12xlarge", 48, 192, 3.912, 4),
                             ("g5.xlarge", 4, 16, 1.006, 1), ("g5.12xlarge", 48, 192, 5.672, 4), ("p3.2xlarge", 8, 61, 3.06, 1)):
        out.append(_mk(name, v, m, p, "amd64", gpus=g))
    out.append(_mk("m5.metal", 96, 384, 4.608, "amd64", metal=True))
    out.append(_mk("c5.metal", 96, 192, 4.08, "amd64", metal=True))
    return out


def _mk(name, vcpu, mem_gib, price, arch, gpus=0, metal=False):
    fam, size = name.split(".")
    mib = int(mem_gib * 1024)
    pods = 110 if vcpu >= 8 else (29 if vcpu >= 4 else 17)
    labels = {L.ARCH: arch, L.OS: "linux", L.INSTANCE_TYPE: name, L.REGION: "us-east-1", L.INSTANCE_FAMILY: fam,
              L.INSTANCE_SIZE: "metal" if metal else size, L.INSTANCE_CATEGORY: fam.rstrip("0123456789adgnie") or fam[0],
              L.INSTANCE_CPU: str(vcpu), L.INSTANCE_MEMORY: str(mib)}
    cap = {"cpu": vcpu * 1000, "memory": (mib - -(-mib * 75 // 1000)) * 2**20, "pods": pods, "ephemeral-storage": 20 * 2**30}
    if gpus:
        labels[L.INSTANCE_GPU_COUNT] = str(gpus)
        cap[L.RESOURCE_NVIDIA_GPU] = gpus
    kcpu = 60 + (10 if vcpu > 1 else 0) + (10 if vcpu > 2 else 0) + 2.5 * max(0, vcpu - 4)
    over = {"cpu": int(kcpu), "memory": (11 * pods + 255 + 100) * 2**20, "ephemeral-storage": 2 * 2**30}
    h = sum(map(ord, name))
    offers = [Offering(z, "on-demand", round(price, 5)) for z in ZONES]
    offers += [Offering(z, "spot", round(price * (0.3 + ((h + i * 7) % 40) / 100), 5)) for i, z in enumerate(ZONES)]
    return InstanceType(name=name, labels=labels, capacity=cap, overhead=over, offerings=offers)


def karpenter_catalog(total: int = 400):
    """Instance types with the facts of Karpenter's ``fake.InstanceTypes(400)`` (pkg/cloudprovider/fake), the
    catalog its scheduling benchmark runs on: type i (0-based) has i+1 vCPU, 2*(i+1) GiB, 10*(i+1) pods;
    kube-reserved 100m CPU + 10Mi memory; every offering costs 0.1*vCPU + 0.1*(memory bytes / 1e9) per hour;
    spot in test-zone-1/2, on-demand in test-zone-1/2/3; amd64.  (Karpenter's fake types also offer os
    linux/windows/darwin; our labels are single-valued, so os is linux, which no benchmark pod constrains.)"""
    out = []
    for i in range(total):
        vcpu = i + 1
        mem = 2 * vcpu * 2**30
        price = round(0.1 * vcpu + 0.1 * (mem / 1e9), 6)
        name = f"fake-it-{i}"
        labels = {L.ARCH: "amd64", L.OS: "linux", L.INSTANCE_TYPE: name, L.REGION: "test-region",
                  L.INSTANCE_CPU: str(vcpu), L.INSTANCE_MEMORY: str(mem // 2**20)}
        cap = {"cpu": vcpu * 1000, "memory": mem, "pods": 10 * vcpu, "ephemeral-storage": 20 * 2**30}
        over = {"cpu": 100, "memory": 10 * 2**20}
        offers = [Offering(z, "spot", price) for z in KZONES[:2]] + [Offering(z, "on-demand", price) for z in KZONES]
        out.append(InstanceType(name=name, labels=labels, capacity=cap, overhead=over, offerings=offers))
    return out


def get_catalog(which: str):
    if which == "karpenter":
        return karpenter_catalog(), "karpenter (fake.InstanceTypes(400) facts)"
    if which in ("auto", "real"):
        try:
            import karpenter_lambda.catalog.instancetypes  # noqa: F401
            types = real_catalog()
            if len(types) >= 400 or which == "real":
                return types, "real (moto us-east-1 EC2 data, zones a-c)"
        except Exception as e:  # pragma: no cover - fallback path
            if which == "real":
                raise
            print(f"real catalog unavailable ({e}); using synthetic", file=sys.stderr)
    return synthetic_catalog(), "synthetic"


# ------------------------------------------------------------------------------------------------ pods
def make_pods(count: int, mix: str, seed: int = 42):
    r = random.Random(seed)
    n = [0]

    def pod(labels, spec_extra):
        n[0] += 1
        spec = {"containers": [{"name": "app", "image": "pause", "resources": {"requests": {
            "cpu": f"{r.choice(CPU)}m", "memory": f"{r.choice(MEM)}Mi"}}}]}
        spec.update(spec_extra)
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pod-{n[0]}", "namespace": "default", "uid": f"uid-{n[0]:06d}", "labels": labels},
                "spec": spec}

    def lbl():
        return {"my-label": r.choice(LABEL_VALUES)}

    def generic(k):
        return [pod(lbl(), {}) for _ in range(k)]

    def spread(k, key):
        return [pod(lbl(), {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                                           "labelSelector": {"matchLabels": lbl()}}]}) for _ in range(k)]

    def affinity(k, key):
        out = []
        for _ in range(k):
            labels = {"my-affininity": r.choice(LABEL_VALUES)}
            sel = {"my-affininity": r.choice(LABEL_VALUES)}
            out.append(pod(labels, {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": sel}, "topologyKey": key}]}}}))
        return out

    def anti(k, key):
        labels = {"app": "nginx"}
        return [pod(dict(labels), {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}}) for _ in range(k)]

    if mix == "generic":
        return generic(count)
    if mix == "spread":
        return spread_deployments(count, r)
    k = count // 6
    pods = generic(k) + spread(k, L.ZONE) + spread(k, L.HOSTNAME) + affinity(k, L.HOSTNAME) + affinity(k, L.ZONE) + anti(k, L.HOSTNAME)
    pods += generic(count - len(pods))
    return pods


def spread_deployments(count: int, r: random.Random) -> list:
    """Mix "spread": Deployments of 5-200 replicas (one request vector each) until ``count`` pods; 30% of the
    Deployments spread over zones and 10% over hostnames (maxSkew 1, DoNotSchedule, selecting their own pods)."""
    pods: list = []
    d = 0
    while len(pods) < count:
        d += 1
        n = min(r.randint(5, 200), count - len(pods))
        cpu, mem = r.choice(CPU), r.choice(MEM)
        kind = r.random()
        labels = {"app": f"deploy-{d}"}
        spec: dict = {"containers": [{"name": "app", "image": "pause", "resources": {"requests": {
            "cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}
        key = L.ZONE if kind < 0.3 else L.HOSTNAME if kind < 0.4 else None
        if key:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": dict(labels)}}]
        for i in range(n):
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"deploy-{d}-{i}", "namespace": "default", "uid": f"uid-{d}-{i:04d}",
                                      "labels": dict(labels)},
                         "spec": spec})
    return pods


# ------------------------------------------------------------------------------------------------ LP bound
def lp_lower_bound(types, cpu_m: int, mem_b: int) -> float:
    """Cheapest fractional mix of instance types (cheapest offering each) covering total CPU and memory.

    Exact: a 2-constraint LP has an optimal basic solution with at most two types, so enumerate every single
    type and every pair (solving the 2x2 system) over allocatable CPU and memory."""
    items = []
    for t in types:
        a = t.allocatable
        o = t.cheapest_offering()
        if o and a.get("cpu", 0) > 0 and a.get("memory", 0) > 0:
            items.append((a["cpu"], a["memory"], o.price))
    best = min(max(cpu_m / c, mem_b / m) * p for c, m, p in items)
    for i in range(len(items)):
        c1, m1, p1 = items[i]
        for j in range(i + 1, len(items)):
            c2, m2, p2 = items[j]
            det = c1 * m2 - c2 * m1
            if det == 0:
                continue
            x1 = (cpu_m * m2 - c2 * mem_b) / det
            x2 = (c1 * mem_b - cpu_m * m1) / det
            if x1 >= 0 and x2 >= 0:
                cost = x1 * p1 + x2 * p2
                if cost < best:
                    best = cost
    return best


def undominated(items: list) -> list:
    """The LP's node types without the dominated ones: a type is dropped when another offers at least as much cpu,
    memory and pod slots per dollar and fits every request vector it fits (``items``: (cpu, memory, pods, price,
    fits)). Exact: whatever share of the pods a dropped type holds, the same dollars of its dominator hold too,
    so the optimum is unchanged; among identical types the first is kept. The LP becomes a few dozen columns
    per vector instead of a thousand (seconds -> milliseconds at 1,000 types)."""
    import numpy as np

    if not items:
        return items
    ratios = np.array([(c / price, m / price, p / price) for c, m, p, price, _f in items])
    masks = [sum(1 << j for j in fits) for *_x, fits in items]
    kept = []
    for i, item in enumerate(items):
        at_least = np.flatnonzero((ratios >= ratios[i]).all(axis=1))
        dominated = False
        for k in at_least:
            if k == i or masks[i] & ~masks[k]:
                continue
            if k < i or masks[k] != masks[i] or (ratios[k] != ratios[i]).any():
                dominated = True
                break
        if not dominated:
            kept.append(item)
    return kept


def fit_lower_bound(types, vectors: dict) -> float | None:
    """A tighter bound, for judging the packer where the LP bound is unreachable: the LP relaxation with the
    pods kept apart by request vector, each vector only on types one such pod fits on (cpu, memory and pod
    slots per node as capacities).  ``vectors``: {(cpu m, memory bytes): pod count}.  Still a lower bound on
    any integral packing (nodes and pods fractional), but a type whose memory holds no pod (t4g.nano) gives
    nothing.  Needs scipy (HiGHS); None without it."""
    try:
        import numpy as np
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix
    except ImportError:
        return None
    vecs = list(vectors)
    items = []
    for t in types:
        a, o = t.allocatable, t.cheapest_offering()
        if o and a.get("cpu", 0) > 0 and a.get("memory", 0) > 0 and a.get("pods", 0) > 0:
            fits = [j for j, (c, m) in enumerate(vecs) if c <= a["cpu"] and m <= a["memory"]]
            if fits:
                items.append((a["cpu"], a["memory"] / 2**20, a["pods"], o.price, fits))
    items = undominated(items)
    nt = len(items)
    cost, rows, cols, vals, b_ub, eq_rows, eq_cols = [], [], [], [], [], [], []
    for ti, (c, m, p, price, fits) in enumerate(items):  # x_t then y_jt
        cost.append(price)
        for r, cap in enumerate((c, m, p)):
            rows.append(3 * ti + r)
            cols.append(ti)
            vals.append(-cap)
    col = nt
    for ti, (c, m, p, price, fits) in enumerate(items):
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
    a_ub = coo_matrix((vals, (rows, cols)), shape=(3 * nt, col)).tocsr()
    a_eq = coo_matrix(([1.0] * len(eq_rows), (eq_rows, eq_cols)), shape=(len(vecs), col)).tocsr()
    res = linprog(np.array(cost), A_ub=a_ub, b_ub=np.zeros(3 * nt), A_eq=a_eq,
                  b_eq=np.array([float(vectors[v]) for v in vecs]), bounds=(0, None), method="highs")
    return float(res.fun) if res.status == 0 else None


# ------------------------------------------------------------------------------------------------ run
def nodepool():
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                     "spec": {"template": {"spec": {"requirements": [
                         {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def run_one(types, catalog_name, count, mix, lb_types=None):
    """Time ``solve()`` on ``count`` pods of ``mix``; returns (JSON row, input of the fit-aware bound)."""
    from karpenter_lambda.scheduling.resources import pod_requests

    pods = make_pods(count, mix)
    inp = SchedulingInput(pods=pods, nodepools=[NodePoolInput(nodepool(), types)])
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    res = solve(inp)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the bounds (scipy) are computed
    cpu = mem = 0
    vectors: dict = {}
    for p in pods:
        r = pod_requests(p)
        cpu += r.get("cpu", 0)
        mem += r.get("memory", 0)
        v = (r.get("cpu", 0), r.get("memory", 0))
        vectors[v] = vectors.get(v, 0) + 1
    od = [InstanceType(t.name, t.labels, t.capacity, t.overhead, [o for o in t.offerings if o.capacity_type == "on-demand"])
          for t in (lb_types or types)]
    lb = lp_lower_bound(od, cpu, mem)
    placed = sum(len(n.pods) for n in res.nodeclaims)
    return {
        "pods": count, "mix": mix, "catalog": catalog_name, "instance_types": len(types),
        "seconds": round(dt, 4), "cpu_seconds": round(dc, 4), "pods_per_second": round(count / dt, 1) if dt else None,
        "nodes": len(res.nodeclaims), "pods_placed": placed, "unschedulable": len(res.unschedulable),
        "cost_per_hour": round(res.cost_per_hour, 4), "lower_bound_cost_per_hour": round(lb, 4),
        "cost_vs_bound": round(res.cost_per_hour / lb, 4) if lb else None,
        "peak_rss_mb": round(rss, 1),
        "fit_lower_bound_cost_per_hour": None, "cost_vs_fit_bound": None,
    }, (od, vectors)


def add_fit_bound(row: dict, bound_input) -> dict:
    flb = fit_lower_bound(*bound_input)
    if flb:
        row["fit_lower_bound_cost_per_hour"] = round(flb, 4)
        row["cost_vs_fit_bound"] = round(row["cost_per_hour"] / flb, 4)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, action="append", help="pod count (repeatable); default 1000 5000 10000 20000")
    ap.add_argument("--json", action="store_true", help="print one JSON object per size")
    ap.add_argument("--mix", choices=["karpenter", "generic", "spread"], default="karpenter",
                    help="karpenter: Karpenter's diverse pods; generic: unconstrained pods; spread: Deployments, 30%% "
                         "zone-spread and 10%% hostname-spread")
    ap.add_argument("--catalog", choices=["karpenter", "auto", "real", "synthetic"], default="karpenter",
                    help="karpenter: Karpenter's fake.InstanceTypes(400) (default, what its published figures use); "
                         "real: moto's us-east-1 EC2 data (1,334 Linux types); synthetic: 436 AWS-like types; "
                         "auto: real, else synthetic")
    ap.add_argument("--no-fit-bound", action="store_true", help="skip the fit-aware LP bound (scipy)")
    a = ap.parse_args(argv)
    types, name = get_catalog(a.catalog)
    runs = [run_one(types, name, n, a.mix) for n in a.pods or [1000, 5000, 10000, 20000]]
    out = []
    for r, bound_input in runs:  # after every timed solve, so scipy is not in the RSS figures
        if not a.no_fit_bound:
            add_fit_bound(r, bound_input)
        out.append(r)
        if a.json:
            print(json.dumps(r), flush=True)
        else:
            print(f"{r['pods']:>6} pods  {r['seconds']:>7.3f}s  {r['pods_per_second']:>9.0f} pods/s  {r['nodes']:>5} nodes  "
                  f"${r['cost_per_hour']:.2f}/h (LP bound ${r['lower_bound_cost_per_hour']:.2f}, x{r['cost_vs_bound']})  "
                  f"fit bound {r['fit_lower_bound_cost_per_hour']} x{r['cost_vs_fit_bound']}  unschedulable {r['unschedulable']}  rss {r['peak_rss_mb']} MB  [{r['catalog']}]", flush=True)
    return out


if __name__ == "__main__":
    main()
