"""Well-known labels computed from moto's real instance descriptions."""

import json

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import EC2NodeClass
from karpenter_lambda.catalog import PriceBook, build_instance_types
from karpenter_lambda.catalog.instancetypes import compute_labels
from karpenter_lambda.cli.main import main

REGION = "us-east-1"


def test_m5_large_labels(default_catalog):
    lab = default_catalog["m5.large"].labels
    assert lab == {
        L.INSTANCE_TYPE: "m5.large",
        L.ARCH: "amd64",
        L.OS: "linux",
        L.REGION: "us-east-1",
        L.INSTANCE_CPU: "2",
        L.INSTANCE_MEMORY: "8192",
        L.INSTANCE_HYPERVISOR: "nitro",
        L.INSTANCE_ENCRYPTION_IN_TRANSIT: "false",
        L.INSTANCE_CATEGORY: "m",
        L.INSTANCE_GENERATION: "5",
        L.INSTANCE_FAMILY: "m5",
        L.INSTANCE_SIZE: "large",
        L.INSTANCE_CAPABILITY_FLEX: "false",
        L.INSTANCE_NETWORK_BANDWIDTH: "750",
        L.INSTANCE_CPU_MANUFACTURER: "intel",
        L.INSTANCE_CPU_SUSTAINED_CLOCK: "3100",
        L.INSTANCE_EBS_BANDWIDTH: "4750",
        L.NITRO_SANDBOX: "false",          # NitroEnclavesSupport: unsupported (2 vCPUs)
        L.INSTANCE_TENANCY: "default",
    }


def test_graviton_labels(default_catalog):
    lab = default_catalog["c6g.xlarge"].labels
    assert lab[L.ARCH] == "arm64"
    assert lab[L.INSTANCE_CPU_MANUFACTURER] == "aws"
    assert (lab[L.INSTANCE_CATEGORY], lab[L.INSTANCE_GENERATION], lab[L.INSTANCE_FAMILY]) == ("c", "6", "c6g")
    assert lab[L.INSTANCE_CPU] == "4"


def test_t3_micro_labels(default_catalog):
    lab = default_catalog["t3.micro"].labels
    assert (lab[L.INSTANCE_MEMORY], lab[L.INSTANCE_SIZE], lab[L.INSTANCE_CATEGORY]) == ("1024", "micro", "t")
    assert L.INSTANCE_GPU_NAME not in lab and L.INSTANCE_LOCAL_NVME not in lab


def test_gpu_labels(default_catalog):
    lab = default_catalog["g4dn.xlarge"].labels
    assert lab[L.INSTANCE_GPU_NAME] == "t4"
    assert lab[L.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert lab[L.INSTANCE_GPU_COUNT] == "1"
    assert lab[L.INSTANCE_GPU_MEMORY] == "16384"
    assert lab[L.INSTANCE_LOCAL_NVME] == "125"
    p4d = default_catalog["p4d.24xlarge"].labels
    assert (p4d[L.INSTANCE_GPU_NAME], p4d[L.INSTANCE_GPU_COUNT], p4d[L.INSTANCE_GPU_MEMORY]) == ("a100", "8", "40960")
    assert p4d[L.INSTANCE_NETWORK_BANDWIDTH] == "400000"  # 4 network cards x 100 Gbps


def test_gpu_labels_only_for_a_single_gpu_kind(raw, moto_ec2_data):
    info = raw("g4dn.xlarge")
    info["InstanceType"] = "g4dn.2xlarge"  # reuse an offered name
    info["GpuInfo"]["Gpus"].append({"Name": "A10G", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 24576}})
    [it] = build_instance_types([info], moto_ec2_data[1], PriceBook.from_bundled(REGION), REGION)
    assert L.INSTANCE_GPU_NAME not in it.labels and L.INSTANCE_GPU_COUNT not in it.labels
    assert it.capacity["nvidia.com/gpu"] == 2


def test_neuron_accelerator_labels(default_catalog):
    inf1 = default_catalog["inf1.xlarge"].labels
    assert (inf1[L.INSTANCE_ACCELERATOR_NAME], inf1[L.INSTANCE_ACCELERATOR_MANUFACTURER], inf1[L.INSTANCE_ACCELERATOR_COUNT]) == (
        "inferentia",
        "aws",
        "1",
    )
    inf2 = default_catalog["inf2.xlarge"].labels
    assert inf2[L.INSTANCE_ACCELERATOR_NAME] == "inferentia2"
    assert inf2[L.INSTANCE_CPU_MANUFACTURER] == "amd"
    trn1 = default_catalog["trn1.2xlarge"].labels
    assert (trn1[L.INSTANCE_ACCELERATOR_NAME], trn1[L.INSTANCE_ACCELERATOR_COUNT]) == ("trainium", "1")


def test_local_nvme_and_encryption(default_catalog):
    lab = default_catalog["m6id.large"].labels
    assert lab[L.INSTANCE_LOCAL_NVME] == "118"
    assert lab[L.INSTANCE_ENCRYPTION_IN_TRANSIT] == "true"
    assert lab[L.INSTANCE_NETWORK_BANDWIDTH] == "781"


def test_non_nvme_instance_store_has_no_local_nvme_label(default_catalog):
    lab = default_catalog["c3.large"].labels
    assert L.INSTANCE_LOCAL_NVME not in lab
    assert lab[L.ARCH] == "amd64"  # i386 + x86_64: amd64
    assert lab[L.INSTANCE_HYPERVISOR] == "xen"


def test_metal_type_kept_with_empty_hypervisor(default_catalog):
    lab = default_catalog["c5.metal"].labels
    assert lab[L.INSTANCE_SIZE] == "metal"
    assert lab[L.INSTANCE_HYPERVISOR] == ""  # as Karpenter: DescribeInstanceTypes gives none for bare metal
    assert lab[L.INSTANCE_CPU] == "96"


def test_flex_capability(default_catalog):
    lab = default_catalog["c7i-flex.large"].labels
    assert lab[L.INSTANCE_CAPABILITY_FLEX] == "true"
    assert (lab[L.INSTANCE_FAMILY], lab[L.INSTANCE_CATEGORY], lab[L.INSTANCE_GENERATION]) == ("c7i-flex", "c", "7")


def test_category_regex_with_tb_infix(default_catalog):
    lab = default_catalog["u-6tb1.56xlarge"].labels
    assert (lab[L.INSTANCE_CATEGORY], lab[L.INSTANCE_GENERATION], lab[L.INSTANCE_FAMILY]) == ("u", "1", "u-6tb1")


def test_labels_are_all_well_known_and_strings(default_catalog):
    for it in default_catalog.values():
        for k, v in it.labels.items():
            assert k in L.WELL_KNOWN, (it.name, k)
            assert isinstance(v, str), (it.name, k)


def test_windows_labels_and_arm_types_skipped(moto_ec2_data):
    raw_types, offerings = moto_ec2_data
    nc = EC2NodeClass(
        {
            "kind": "EC2NodeClass",
            "metadata": {"name": "win"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "windows2022@latest"}]},
        }
    )
    skipped = {}
    types = {it.name: it for it in build_instance_types(raw_types, offerings, PriceBook.from_bundled(REGION), REGION, nc, skipped=skipped)}
    assert types["m5.large"].labels[L.OS] == "windows"
    assert types["m5.large"].labels[L.WINDOWS_BUILD] == "10.0.20348"
    assert "c6g.xlarge" not in types and skipped["c6g.xlarge"] == "Windows2022 needs amd64"


def test_mac_types_skipped_with_reason(moto_ec2_data):
    raw_types, offerings = moto_ec2_data
    skipped = {}
    build_instance_types(raw_types, offerings, PriceBook.from_bundled(REGION), REGION, skipped=skipped)
    assert skipped["mac2.metal"].startswith("unsupported architecture")
    assert skipped["r9g.large"] == "no offering: no price known"  # not in the bundled table, so no spot estimate either
    assert skipped["hpc7a.12xlarge"] == "no offering: not offered in any zone"


@pytest.mark.parametrize("region", ["eu-west-1", "us-gov-west-1"])
def test_region_label(moto_ec2_data, region):
    raw_types, offerings = moto_ec2_data
    types = build_instance_types(raw_types[:50], offerings, PriceBook.from_bundled(region), region)
    assert types and all(it.labels[L.REGION] == region for it in types)


def test_sustained_clock_speed_is_zero_without_a_figure():
    """Karpenter's computeRequirements: ``"0"`` when ProcessorInfo gives no SustainedClockSpeedInGhz (c1, m1, m2,
    t1.micro), nothing without ProcessorInfo."""
    old = {"InstanceType": "c1.medium", "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 1740},
           "ProcessorInfo": {"Manufacturer": "Intel", "SupportedArchitectures": ["i386", "x86_64"]}}
    assert compute_labels(old, REGION, L.ARCH_AMD64)[L.INSTANCE_CPU_SUSTAINED_CLOCK] == "0"
    new = {**old, "ProcessorInfo": {**old["ProcessorInfo"], "SustainedClockSpeedInGhz": 2.2}}
    assert compute_labels(new, REGION, L.ARCH_AMD64)[L.INSTANCE_CPU_SUSTAINED_CLOCK] == "2200"
    bare = {k: v for k, v in old.items() if k != "ProcessorInfo"}
    assert L.INSTANCE_CPU_SUSTAINED_CLOCK not in compute_labels(bare, REGION, L.ARCH_AMD64)


def test_plan_selects_old_types_by_their_zero_clock_speed(tmp_path, capsys):
    (tmp_path / "all.yaml").write_text("""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: slowclock}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz, operator: Lt, values: ["1000"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms: [{alias: al2@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
---
apiVersion: v1
kind: Pod
metadata: {name: app, namespace: default}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m, memory: 100Mi}}}]
""")
    assert main(["plan", "--json", "-f", str(tmp_path / "all.yaml")]) == 0
    out = json.loads(capsys.readouterr().out)
    [nc] = out["nodeClaims"]
    assert nc["instanceType"] == "t1.micro" and set(nc["instanceTypes"]) <= {"c1.medium", "c1.xlarge", "m1.small", "m1.medium",
                                                                           "m1.large", "m1.xlarge", "m2.xlarge", "m2.2xlarge",
                                                                           "m2.4xlarge", "t1.micro"}
