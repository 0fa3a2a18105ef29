"""Capacity, overhead and allocatable against Karpenter's AWS formulas, worked out by hand.

Formulas (A:pkg/providers/instancetype/types.go):
  memory capacity  = (MiB - 64 if arm64 else MiB) - ceil(that * 0.075)       [MiB]
  pods             = ENIs * (IPv4 per ENI - 1) + 2  (AL2/AL2023/Bottlerocket), 110 (Windows)
  kube-reserved    = cpu 6% of core 1 + 1% of core 2 + 0.5% of cores 3-4 + 0.25% above
                     memory 11 * pods + 255 MiB; ephemeral-storage 1Gi
  eviction         = memory 100Mi; ephemeral-storage 10% of the root volume (20Gi default)
  allocatable      = capacity - kube-reserved - system-reserved - eviction
"""

import math

import pytest

from karpenter_lambda.api.objects import EC2NodeClass
from karpenter_lambda.catalog import PriceBook, build_instance_types
from karpenter_lambda.catalog.allocatable import (
    NodeSettings,
    compute_capacity,
    compute_overhead,
    eni_limited_pods,
    kube_reserved_cpu,
    max_pods,
)

MiB = 2**20
GiB = 2**30
REGION = "us-east-1"


def nodeclass(spec: dict) -> EC2NodeClass:
    base = {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}]}
    base.update(spec)
    return EC2NodeClass({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"}, "spec": base})


def build(raw, name, nc=None):
    info = raw(name)
    settings = NodeSettings.from_nodeclass(nc)
    cap = compute_capacity(info, settings)
    return cap, compute_overhead(info, cap, settings)


# --- worked examples (default AL2023 node class) ------------------------------------------


def test_m5_large_worked_example(default_catalog):
    it = default_catalog["m5.large"]
    # 2 vCPU, 8192 MiB, x86_64, 3 ENIs x 10 IPv4
    mem_mib = 8192 - math.ceil(8192 * 0.075)  # 8192 - 615 = 7577
    pods = 3 * (10 - 1) + 2  # 29
    assert (mem_mib, pods) == (7577, 29)
    assert it.capacity["cpu"] == 2000
    assert it.capacity["memory"] == 7577 * MiB
    assert it.capacity["pods"] == 29
    assert it.capacity["ephemeral-storage"] == 20 * GiB
    kube_cpu = 60 + 10  # 6% of 1000m + 1% of 1000m
    kube_mem = (11 * 29 + 255) * MiB  # 574 MiB
    evict_mem = 100 * MiB
    evict_eph = 20 * GiB // 10  # 10% of 20Gi, exact
    assert it.overhead == {"cpu": kube_cpu, "memory": kube_mem + evict_mem, "ephemeral-storage": 1 * GiB + evict_eph}
    assert it.allocatable["cpu"] == 1930
    assert it.allocatable["memory"] == (7577 - 574 - 100) * MiB  # 6903 MiB
    assert it.allocatable["ephemeral-storage"] == 17 * GiB
    assert it.allocatable["pods"] == 29
    assert it.capacity["vpc.amazonaws.com/pod-eni"] == 9  # trunking-compatible: branch ENIs from the VPC limits table


def test_c6g_xlarge_worked_example_graviton(default_catalog):
    it = default_catalog["c6g.xlarge"]
    # 4 vCPU, 8192 MiB arm64 (64 MiB CMA reserved first), 4 ENIs x 15 IPv4
    base = 8192 - 64  # 8128
    mem_mib = base - math.ceil(base * 0.075)  # 8128 - ceil(609.6) = 7518
    pods = 4 * (15 - 1) + 2  # 58
    assert (mem_mib, pods) == (7518, 58)
    assert it.capacity["memory"] == 7518 * MiB
    assert it.capacity["pods"] == 58
    kube_cpu = 60 + 10 + 10  # cores 1, 2, then 0.5% of 2000m for cores 3-4
    assert it.overhead["cpu"] == kube_cpu
    assert it.allocatable["cpu"] == 4000 - 80
    kube_mem_mib = 11 * 58 + 255  # 893
    assert it.allocatable["memory"] == (7518 - 893 - 100) * MiB  # 6525 MiB


def test_t3_micro_worked_example(default_catalog):
    it = default_catalog["t3.micro"]
    # 2 vCPU, 1024 MiB, 2 ENIs x 2 IPv4
    mem_mib = 1024 - math.ceil(1024 * 0.075)  # 1024 - ceil(76.8) = 947
    pods = 2 * (2 - 1) + 2  # 4
    assert it.capacity["memory"] == mem_mib * MiB == 947 * MiB
    assert it.capacity["pods"] == pods == 4
    assert it.allocatable["memory"] == (947 - (11 * 4 + 255) - 100) * MiB  # 548 MiB
    assert it.allocatable["cpu"] == 2000 - 70
    assert "vpc.amazonaws.com/pod-eni" not in it.capacity  # t3 is not trunking-compatible


def test_g4dn_xlarge_worked_example_gpu(default_catalog):
    it = default_catalog["g4dn.xlarge"]
    # 4 vCPU, 16384 MiB, 1 NVIDIA T4, 3 ENIs x 10 IPv4
    mem_mib = 16384 - math.ceil(16384 * 0.075)  # 16384 - ceil(1228.8) = 15155
    assert it.capacity["memory"] == mem_mib * MiB == 15155 * MiB
    assert it.capacity["nvidia.com/gpu"] == 1
    assert it.allocatable["nvidia.com/gpu"] == 1
    assert it.capacity["pods"] == 29
    assert it.allocatable["memory"] == (15155 - 574 - 100) * MiB
    assert it.allocatable["cpu"] == 4000 - (60 + 10 + 10)


def test_p4d_gpu_and_efa(default_catalog):
    it = default_catalog["p4d.24xlarge"]
    assert it.capacity["nvidia.com/gpu"] == 8
    # EfaInfo.MaximumEfaInterfaces (Karpenter's efas); attached at launch only for a NodeClaim requesting EFA
    assert it.capacity["vpc.amazonaws.com/efa"] == 4
    # 96 vCPU: 60 + 10 + 10 + 0.25% of (96000 - 4000)m = 60 + 10 + 10 + 230
    assert it.overhead["cpu"] == 310


def test_neuron_devices_and_cores(default_catalog):
    inf1 = default_catalog["inf1.xlarge"]  # 1 Inferentia device with 4 cores
    assert inf1.capacity["aws.amazon.com/neuron"] == 1
    assert inf1.capacity["aws.amazon.com/neuroncore"] == 4
    inf2 = default_catalog["inf2.xlarge"]  # 1 Inferentia2 device with 2 cores
    assert inf2.capacity["aws.amazon.com/neuron"] == 1
    assert inf2.capacity["aws.amazon.com/neuroncore"] == 2
    assert "nvidia.com/gpu" not in inf2.capacity


def test_amd_and_habana_gpus_counted_by_manufacturer(raw):
    info = raw("g4dn.xlarge")
    info["GpuInfo"]["Gpus"] = [
        {"Name": "Radeon Pro V520", "Manufacturer": "AMD", "Count": 2, "MemoryInfo": {"SizeInMiB": 8192}},
        {"Name": "Gaudi HL-205", "Manufacturer": "Habana", "Count": 3, "MemoryInfo": {"SizeInMiB": 32768}},
    ]
    cap = compute_capacity(info, NodeSettings())
    assert cap["amd.com/gpu"] == 2
    assert cap["habana.ai/gaudi"] == 3
    assert "nvidia.com/gpu" not in cap


def test_kube_reserved_cpu_tiers():
    assert kube_reserved_cpu(1000) == 60
    assert kube_reserved_cpu(2000) == 70
    assert kube_reserved_cpu(3000) == 75  # + 0.5% of 1000m
    assert kube_reserved_cpu(4000) == 80
    assert kube_reserved_cpu(8000) == 90  # + 0.25% of 4000m
    assert kube_reserved_cpu(48000) == 60 + 10 + 10 + 110


# --- max pods ------------------------------------------------------------------------------


def test_max_pods_kubelet_max_pods_wins(raw):
    nc = nodeclass({"kubelet": {"maxPods": 110}})
    cap, over = build(raw, "m5.large", nc)
    assert cap["pods"] == 110
    # AL2023 still reserves memory for the ENI-limited pod count (29), not for 110
    assert over["memory"] == (11 * 29 + 255 + 100) * MiB


def test_max_pods_pods_per_core_caps(raw):
    nc = nodeclass({"kubelet": {"podsPerCore": 4}})
    cap, _ = build(raw, "m5.large", nc)
    assert cap["pods"] == min(29, 4 * 2)  # 8
    nc = nodeclass({"kubelet": {"podsPerCore": 40}})
    cap, _ = build(raw, "m5.large", nc)
    assert cap["pods"] == 29  # the cap is above the ENI limit


def test_pods_per_core_ignored_on_bottlerocket(raw):
    nc = nodeclass({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "kubelet": {"podsPerCore": 4}})
    cap, over = build(raw, "m5.large", nc)
    assert cap["pods"] == 29
    nc = nodeclass({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "kubelet": {"maxPods": 20}})
    cap, over = build(raw, "m5.large", nc)
    assert cap["pods"] == 20
    # Bottlerocket reserves memory for the pods it actually runs
    assert over["memory"] == (11 * 20 + 255 + 100) * MiB


def test_windows_defaults_to_110_pods_and_50gi(raw):
    nc = nodeclass({"amiSelectorTerms": [{"alias": "windows2022@latest"}]})
    cap, over = build(raw, "m5.large", nc)
    assert cap["pods"] == 110
    assert cap["ephemeral-storage"] == 50 * GiB
    assert over["memory"] == (11 * 110 + 255 + 100) * MiB
    assert cap["vpc.amazonaws.com/PrivateIPv4Address"] == 10 - 1


def test_unknown_type_without_network_info_gets_110(raw):
    info = raw("m5.large")
    info["InstanceType"] = "zz9.large"  # not in the VPC limits table
    del info["NetworkInfo"]
    assert eni_limited_pods(info) is None
    assert max_pods(info, NodeSettings()) == 110


def test_type_missing_from_table_uses_describe_network_info(raw):
    info = raw("m5.large")
    info["InstanceType"] = "zz9.large"
    info["NetworkInfo"]["NetworkCards"][0]["MaximumNetworkInterfaces"] = 4
    info["NetworkInfo"]["Ipv4AddressesPerInterface"] = 15
    assert max_pods(info, NodeSettings()) == 4 * (15 - 1) + 2


def test_reserved_enis_reduce_pods(raw):
    assert max_pods(raw("m5.large"), NodeSettings(reserved_enis=1)) == (3 - 1) * (10 - 1) + 2


# --- kubelet overrides ----------------------------------------------------------------------


def test_kube_and_system_reserved_override(raw):
    nc = nodeclass(
        {
            "kubelet": {
                "kubeReserved": {"cpu": "200m", "memory": "1Gi"},
                "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "1000"},
            }
        }
    )
    cap, over = build(raw, "m5.large", nc)
    assert over["cpu"] == 200 + 100
    assert over["memory"] == 1 * GiB + 100 * MiB + 100 * MiB  # kube + system + eviction
    assert over["ephemeral-storage"] == 1 * GiB + 1 * GiB + 2 * GiB  # default kube eph + system + 10% eviction
    assert "pid" not in over


def test_eviction_hard_percentages_and_quantities(raw):
    nc = nodeclass({"kubelet": {"evictionHard": {"memory.available": "5%", "nodefs.available": "15%"}}})
    cap, over = build(raw, "m5.large", nc)
    mem_cap = 7577 * MiB
    assert over["memory"] == (11 * 29 + 255) * MiB + math.ceil(mem_cap / 100 * 5)
    assert over["ephemeral-storage"] == 1 * GiB + math.ceil(20 * GiB / 100 * 15)
    nc = nodeclass({"kubelet": {"evictionHard": {"memory.available": "500Mi", "nodefs.available": "100%"}}})
    _, over = build(raw, "m5.large", nc)
    assert over["memory"] == (11 * 29 + 255) * MiB + 500 * MiB
    assert over["ephemeral-storage"] == 1 * GiB  # 100% disables the threshold
    nc = nodeclass({"kubelet": {"evictionSoft": {"memory.available": "50%"}, "evictionSoftGracePeriod": {"memory.available": "1m"}}})
    _, over = build(raw, "m5.large", nc)
    assert over["memory"] == (11 * 29 + 255 + 100) * MiB  # soft thresholds do not change allocatable


def test_bad_kubelet_values_name_the_field(raw):
    nc = nodeclass({"kubelet": {"kubeReserved": {"memory": "lots"}}})
    with pytest.raises(ValueError, match=r"spec\.kubelet\.kubeReserved\.memory"):
        build(raw, "m5.large", nc)
    with pytest.raises(ValueError, match=r"spec\.kubelet\.maxPods"):
        NodeSettings.from_nodeclass(nodeclass({"kubelet": {"maxPods": -1}}))
    with pytest.raises(ValueError, match=r"spec\.amiFamily"):
        NodeSettings(ami_family="Ubuntu").traits


# --- ephemeral storage ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}}]}, 100 * GiB),
        ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "50Gi"}}]}, 50 * GiB),
        # a mapping that is neither root nor the family's ephemeral device: default 20Gi
        ({"blockDeviceMappings": [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}}]}, 20 * GiB),
        (
            {
                "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "60Gi"}},
                ],
            },
            60 * GiB,
        ),
        (
            {
                "amiFamily": "Custom",
                "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}],
                "blockDeviceMappings": [
                    {"deviceName": "/dev/sda1", "ebs": {"volumeSize": "10Gi"}},
                    {"deviceName": "/dev/sdb", "ebs": {"volumeSize": "30Gi"}},
                ],
            },
            30 * GiB,  # Custom: the last mapping
        ),
        ({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}, 20 * GiB),
        ({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200G"}}]}, 200 * 10**9),
    ],
)
def test_ephemeral_storage_from_block_device_mappings(raw, spec, expected):
    cap, over = build(raw, "m5.large", nodeclass(spec))
    assert cap["ephemeral-storage"] == expected
    assert over["ephemeral-storage"] == 1 * GiB + math.ceil(expected / 100 * 10)


def test_raid0_uses_local_nvme(raw):
    nc = nodeclass({"instanceStorePolicy": "RAID0"})
    cap, _ = build(raw, "m6id.large", nc)
    assert cap["ephemeral-storage"] == 118 * 10**9  # TotalSizeInGB, decimal
    cap, _ = build(raw, "m5.large", nc)  # no instance store: back to the root volume
    assert cap["ephemeral-storage"] == 20 * GiB


def test_nodeclass_changes_the_built_catalog(moto_ec2_data):
    raw_types, offerings = moto_ec2_data
    nc = nodeclass({"kubelet": {"maxPods": 50, "systemReserved": {"memory": "200Mi"}}})
    types = {it.name: it for it in build_instance_types(raw_types, offerings, PriceBook.from_bundled(REGION), REGION, nodeclass=nc)}
    m5 = types["m5.large"]
    assert m5.capacity["pods"] == 50
    assert m5.allocatable["memory"] == (7577 - 574 - 200 - 100) * MiB
