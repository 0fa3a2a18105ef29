"""Realistic hand-made instance types and objects for scheduler tests."""

from __future__ import annotations

import re

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodePool
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.scheduling import NodePoolInput, SchedulingInput, solve

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
GI = 2**30
MI = 2**20


def itype(name, vcpu, mem_gib, price, arch="amd64", gpus=0, gpu_name="t4", zones=ZONES, spot=0.4, spot_zones=None,
          pods=58, extra_labels=None):
    fam, size = name.split(".")
    m = re.match(r"^([a-z]+)([0-9]+)", fam)
    labels = {
        L.ARCH: arch, L.OS: "linux", L.INSTANCE_TYPE: name, L.REGION: "us-east-1",
        L.INSTANCE_CATEGORY: m.group(1), L.INSTANCE_GENERATION: m.group(2), L.INSTANCE_FAMILY: fam,
        L.INSTANCE_SIZE: size, L.INSTANCE_CPU: str(vcpu), L.INSTANCE_MEMORY: str(int(mem_gib * 1024)),
        L.INSTANCE_HYPERVISOR: "nitro" if not size.endswith("metal") else "",
        L.INSTANCE_CPU_MANUFACTURER: "aws" if arch == "arm64" else "intel",
    }
    cap = {"cpu": vcpu * 1000, "memory": int(mem_gib * GI * 0.925), "pods": pods, "ephemeral-storage": 20 * GI}
    if gpus:
        labels[L.INSTANCE_GPU_COUNT] = str(gpus)
        labels[L.INSTANCE_GPU_NAME] = gpu_name
        labels[L.INSTANCE_GPU_MANUFACTURER] = "nvidia"
        cap[L.RESOURCE_NVIDIA_GPU] = gpus
    labels.update(extra_labels or {})
    overhead = {"cpu": 80 + 10 * vcpu, "memory": (11 * pods + 255) * MI + 100 * MI, "ephemeral-storage": 2 * GI}
    offers = [Offering(z, "on-demand", price) for z in zones]
    if spot:
        offers += [Offering(z, "spot", round(price * spot * (1 + 0.05 * i), 5)) for i, z in enumerate(spot_zones or zones)]
    return InstanceType(name=name, labels=labels, capacity=cap, overhead=overhead, offerings=offers)


def catalog():
    """~30 types: general, compute, memory, arm, burstable, GPU, metal."""
    out = []
    for fam, ratio, per_vcpu, arch in (("m5", 4, 0.048, "amd64"), ("c5", 2, 0.0425, "amd64"), ("r5", 8, 0.063, "amd64"),
                                       ("m6g", 4, 0.0385, "arm64"), ("c6g", 2, 0.034, "arm64")):
        for size, v in (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16), ("8xlarge", 32)):
            out.append(itype(f"{fam}.{size}", v, v * ratio, round(v * per_vcpu, 4), arch=arch))
    out.append(itype("m5.metal", 96, 384, 4.608, extra_labels={L.INSTANCE_SIZE: "metal"}))
    out.append(itype("t3.micro", 2, 1, 0.0104, pods=4))
    out.append(itype("g4dn.xlarge", 4, 16, 0.526, gpus=1))
    out.append(itype("g4dn.12xlarge", 48, 192, 3.912, gpus=4))
    out.append(itype("g5g.2xlarge", 8, 16, 0.556, arch="arm64", gpus=1, gpu_name="t4g"))
    return out


def nodepool(name="default", requirements=None, labels=None, taints=None, startup_taints=None, limits=None, weight=None):
    spec = {"template": {"metadata": {"labels": labels or {}},
                         "spec": {"requirements": requirements if requirements is not None else [
                             {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                                  "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    if taints:
        spec["template"]["spec"]["taints"] = taints
    if startup_taints:
        spec["template"]["spec"]["startupTaints"] = startup_taints
    if limits:
        spec["limits"] = limits
    if weight:
        spec["weight"] = weight
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec})


_n = [0]


def pod(name=None, cpu="1", memory="1Gi", ns="default", labels=None, owner=None, **spec):
    if name is None:
        _n[0] += 1
        name = f"p{_n[0]}"
    res = {"requests": {}}
    if cpu is not None:
        res["requests"]["cpu"] = cpu
    if memory is not None:
        res["requests"]["memory"] = memory
    extra_res = spec.pop("resources", None)
    if extra_res:
        res["requests"].update(extra_res)
    ports = spec.pop("ports", None)
    ctr = {"name": "app", "image": "nginx", "resources": res}
    if ports:
        ctr["ports"] = ports
    meta = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": f"rs-{owner}", "controller": True}]
    body = {"containers": [ctr]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def pods(n, prefix="w", **kw):
    return [pod(f"{prefix}-{i}", **kw) for i in range(n)]


def run(pod_list, pools=None, types=None, **kw):
    types = types if types is not None else catalog()
    pools = pools if pools is not None else [nodepool()]
    return solve(SchedulingInput(pods=pod_list, nodepools=[NodePoolInput(p, types) for p in pools], **kw))


def node_of(res, key):
    for n in res.nodeclaims:
        if key in n.pods:
            return n
    return None
