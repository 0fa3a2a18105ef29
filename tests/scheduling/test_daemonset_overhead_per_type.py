"""DaemonSet overhead per instance type (Karpenter's ``buildDaemonOverheadGroups`` / ``isDaemonPodCompatible``): a
DaemonSet's requests count only against the instance types its pod can run on -- it tolerates the NodePool's taints,
its node requirements are compatible with the NodePool's, and they intersect the type's requirements."""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling.model import NodePoolInput
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate

from .helpers import GI, MI, catalog, itype, nodepool, pod, run

RINDEX = ["cpu", "memory", "pods"]
BOTH_ARCHES = [{"key": L.ARCH, "operator": "In", "values": ["amd64", "arm64"]},
               {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]


def daemonset(name, cpu, memory="100Mi", node_selector=None, affinity_terms=None, ports=None):
    ctr = {"name": name, "image": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if ports:
        ctr["ports"] = ports
    spec = {"containers": [ctr]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity_terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in affinity_terms]}}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def arch_catalog():
    return [itype("c6g.large", 2, 4, 0.068, arch="arm64", spot=0),
            itype("m6g.xlarge", 4, 16, 0.154, arch="arm64", spot=0),
            itype("m5.large", 2, 8, 0.096, spot=0),
            itype("m5.2xlarge", 8, 32, 0.384, spot=0)]


def template(types, daemonsets, pool=None):
    return NodeClaimTemplate(NodePoolInput(pool or nodepool(requirements=BOTH_ARCHES), types), RINDEX, daemonsets, None)


def by_name(tpl):
    return {t.name: t for t in tpl.types}


AMD_AGENT = daemonset("amd-agent", "3", "6Gi", node_selector={L.ARCH: "amd64"})
GPU_GT0 = [{"key": L.INSTANCE_GPU_COUNT, "operator": "Exists"}]
GPU_PLUGIN = daemonset("nvidia-device-plugin", "2", "4Gi", affinity_terms=[GPU_GT0])


# ---------------------------------------------------------------------------------------- arch-specific DaemonSet
def test_arch_specific_daemonset_counts_only_on_its_arch():
    tpl = template(arch_catalog(), [AMD_AGENT])
    t = by_name(tpl)
    for name in ("c6g.large", "m6g.xlarge"):   # arm64: the amd64 agent never runs there
        alloc = t[name].it.allocatable
        assert t[name].avail == (alloc["cpu"], alloc["memory"], alloc["pods"])
        assert t[name].daemon == {}
    for name in ("m5.large", "m5.2xlarge"):
        alloc = t[name].it.allocatable
        assert t[name].avail == (alloc["cpu"] - 3000, alloc["memory"] - 6 * GI, alloc["pods"] - 1)
        assert t[name].daemon == {"cpu": 3000, "memory": 6 * GI, "pods": 1}
    assert tpl.daemon_groups == 2
    assert tpl.daemon == {}   # what every node of the pool carries: an arm64 node carries none of it


def test_arch_specific_daemonset_does_not_oversize_the_other_arch():
    res = run([pod("small", cpu="100m", memory="128Mi")], pools=[nodepool(requirements=BOTH_ARCHES)],
              types=arch_catalog(), daemonsets=[AMD_AGENT])
    assert not res.unschedulable
    (nc,) = res.nodeclaims
    assert nc.instance_type == "c6g.large"   # not m6g.xlarge, the cheapest that held the agent too
    assert nc.requests["cpu"] == 100 and nc.requests["memory"] == 128 * MI


def test_arch_specific_daemonset_still_counts_on_its_arch():
    amd = {L.ARCH: "amd64"}
    res = run([pod("amd", cpu="1", memory="1Gi", nodeSelector=amd)], pools=[nodepool(requirements=BOTH_ARCHES)],
              types=arch_catalog(), daemonsets=[AMD_AGENT])
    (nc,) = res.nodeclaims
    assert nc.instance_type == "m5.2xlarge"   # m5.large's 1.9 CPU cannot hold the agent's 3
    assert nc.requests["cpu"] == 4000 and nc.requests["memory"] == 7 * GI


def test_offers_holding_charges_each_type_its_own_daemons():
    tpl = NodeClaimTemplate.for_nodepool(NodePoolInput(nodepool(requirements=BOTH_ARCHES), arch_catalog()), [AMD_AGENT])
    offers = tpl.offers_holding({"cpu": 1000})
    assert {o.instance_type.name for o in offers} == {"c6g.large", "m6g.xlarge", "m5.2xlarge"}
    assert {o.instance_type.name: o.daemon.get("cpu", 0) for o in offers} == {
        "c6g.large": 0, "m6g.xlarge": 0, "m5.2xlarge": 3000}


# ------------------------------------------------------------------------------------------- GPU-only DaemonSet
def test_gpu_daemonset_counts_only_on_gpu_types():
    tpl = template(catalog(), [GPU_PLUGIN], pool=nodepool())
    t = by_name(tpl)
    for name in ("g4dn.xlarge", "g4dn.12xlarge", "g5g.2xlarge"):
        assert t[name].daemon == {"cpu": 2000, "memory": 4 * GI, "pods": 1}
        assert t[name].avail[0] == t[name].it.allocatable["cpu"] - 2000
    for name in ("t3.micro", "m5.large", "c6g.large", "m5.metal"):
        assert t[name].daemon == {}
        assert t[name].avail[0] == t[name].it.allocatable["cpu"]
    assert tpl.daemon_groups == 2


def test_gpu_daemonset_does_not_oversize_plain_nodes():
    res = run([pod("small", cpu="100m", memory="128Mi")], daemonsets=[GPU_PLUGIN])
    (nc,) = res.nodeclaims
    assert nc.instance_type == "t3.micro"   # its 1.9 CPU cannot hold the device plugin's 2, nor does it run there
    assert nc.requests["cpu"] == 100


def test_gpu_daemonset_counts_on_the_gpu_node():
    res = run([pod("gpu", cpu="1", memory="1Gi", resources={L.RESOURCE_NVIDIA_GPU: "1"})], daemonsets=[GPU_PLUGIN])
    (nc,) = res.nodeclaims
    assert nc.instance_type == "g4dn.xlarge"
    assert nc.requests["cpu"] == 3000 and nc.requests["memory"] == 5 * GI


def test_daemonset_with_several_terms_counts_where_any_term_intersects():
    ds = daemonset("either", "1", affinity_terms=[GPU_GT0, [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]])
    t = by_name(template(catalog(), [ds], pool=nodepool()))
    assert t["g4dn.xlarge"].daemon["cpu"] == 1000 and t["c6g.large"].daemon["cpu"] == 1000
    assert t["m5.large"].daemon == {} and t["t3.micro"].daemon == {}


# ------------------------------------------------------------------------------ DaemonSet compatible with every type
def test_daemonset_compatible_with_every_type_is_charged_to_every_type():
    everywhere = daemonset("logs", "250m")
    linux = daemonset("node-exporter", "250m", node_selector={L.OS: "linux"})
    tpl = template(catalog(), [everywhere, linux], pool=nodepool())
    assert tpl.daemon == {"cpu": 500, "memory": 200 * MI, "pods": 2}
    for t in tpl.types:
        alloc = t.it.allocatable
        assert t.avail == (alloc["cpu"] - 500, alloc["memory"] - 200 * MI, alloc["pods"] - 2)
    res = run([pod("b", cpu="1")], daemonsets=[everywhere, linux])
    assert res.nodeclaims[0].requests["cpu"] == 1500 and res.nodeclaims[0].requests["pods"] == 3


def test_daemonsets_compatible_with_every_type_make_one_group():
    everywhere = daemonset("logs", "250m")
    linux = daemonset("node-exporter", "250m", node_selector={L.OS: "linux"})
    tpl = template(catalog(), [everywhere, linux], pool=nodepool())
    assert tpl.daemon_groups == 1
    assert all(t.daemon is tpl.daemon for t in tpl.types)   # one group: one shared overhead


# ------------------------------------------------------------------------------------------------------ host ports
def test_daemonset_host_port_only_blocks_where_the_daemonset_runs():
    arm_exporter = daemonset("arm-exporter", "100m", node_selector={L.ARCH: "arm64"},
                             ports=[{"containerPort": 9100, "hostPort": 9100}])
    amd_only = [x for x in arch_catalog() if x.labels[L.ARCH] == "amd64"]
    want = pod("exporter", cpu="100m", memory="64Mi", ports=[{"containerPort": 9100, "hostPort": 9100}])
    res = run([want], pools=[nodepool(requirements=BOTH_ARCHES)], types=amd_only, daemonsets=[arm_exporter])
    assert not res.unschedulable and res.nodeclaims[0].instance_type == "m5.large"
    assert template(amd_only, [arm_exporter]).daemon_ports == frozenset()
    assert template(arch_catalog(), [arm_exporter]).daemon_ports == {("0.0.0.0", "TCP", 9100)}


def test_a_daemonsets_host_port_keeps_a_pod_only_off_the_types_it_runs_on():
    """Karpenter drops only the daemon overhead groups whose host ports conflict: a DaemonSet on amd64 types holding
    hostPort 9100 keeps a pod wanting 9100 off amd64 (an instance-type NotIn on its NodeClaim), not off the NodePool;
    a DaemonSet holding it on every type keeps it off the NodePool, naming the port."""
    port = [{"containerPort": 9100, "hostPort": 9100}]
    amd_exporter = daemonset("exporter", "100m", node_selector={L.ARCH: "amd64"}, ports=port)
    wants = pod("wants9100", cpu="500m", memory="512Mi", ports=port)
    res = run([wants], pools=[nodepool(requirements=BOTH_ARCHES)], types=arch_catalog(), daemonsets=[amd_exporter])
    assert not res.unschedulable
    (nc,) = res.nodeclaims
    assert {it.labels[L.ARCH] for it in nc.instance_types} == {"arm64"} and nc.instance_type == "c6g.large"
    everywhere = daemonset("exporter", "100m", ports=port)
    res = run([wants], pools=[nodepool(requirements=BOTH_ARCHES)], types=arch_catalog(), daemonsets=[everywhere])
    assert res.nodeclaims == [] and "host port 9100/TCP is used by a DaemonSet" in res.unschedulable[0].reason
