"""Launch templates: hash-named, created once, reused, new when options change."""

import base64
import email

import botocore.exceptions
import pytest
import yaml

from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates, ec2_block_device_mappings, options_for
from karpenter_lambda.adapters.aws.userdata import ClusterInfo
from karpenter_lambda.catalog.types import InstanceType

from .conftest import CLUSTER, nodeclass, resolver

INFO = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
LABELS = {"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default"}


def _it(name, arch="amd64", pods=29, gpu=None):
    labels = {"kubernetes.io/arch": arch, "node.kubernetes.io/instance-type": name}
    if gpu:
        labels["karpenter.k8s.aws/instance-gpu-count"] = str(gpu)
    return InstanceType(name=name, labels=labels, capacity={"pods": pods})


def _all_lts(ec2):
    return ec2.describe_launch_templates()["LaunchTemplates"]


def test_same_options_same_name_no_second_template(env):
    r = resolver(env).resolve(nodeclass(tags={"team": "ml"}))
    lts = LaunchTemplates(env.ec2, CLUSTER)
    opts = options_for(r, INFO, r.ami_for(_it("m5.large")), LABELS, [], [], 29)
    a = lts.ensure(opts)
    assert a["name"].startswith("karpenter.k8s.aws/") and a["name"][len("karpenter.k8s.aws/"):].isdigit()
    # a fresh client object (another Lambda invocation) finds it instead of creating
    again = LaunchTemplates(env.ec2, CLUSTER)
    b = again.ensure(options_for(r, INFO, r.ami_for(_it("m5.large")), dict(LABELS), [], [], 29))
    assert a == b and again.created == 0 and len(_all_lts(env.ec2)) == 1
    # different maxPods -> a different template
    c = lts.ensure(options_for(r, INFO, r.ami_for(_it("m5.large")), LABELS, [], [], 58))
    assert c["name"] != a["name"] and len(_all_lts(env.ec2)) == 2


def test_template_contents_and_tags(env):
    r = resolver(env).resolve(nodeclass(tags={"team": "ml"}, metadataOptions={"httpPutResponseHopLimit": 2}))
    ami = r.ami_for(_it("m5.large"))
    lt = LaunchTemplates(env.ec2, CLUSTER).ensure(options_for(r, INFO, ami, LABELS, [{"key": "a", "effect": "NoSchedule"}], [], 29))
    v = env.ec2.describe_launch_template_versions(LaunchTemplateId=lt["id"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert v["ImageId"] == ami.id
    assert v["IamInstanceProfile"]["Name"] == r.instance_profile
    assert v["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [env.sgs["nodes"]]}] and "SecurityGroupIds" not in v
    assert v["MetadataOptions"]["HttpTokens"] == "required" and v["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    assert v["BlockDeviceMappings"] == [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True}}]
    ud = base64.b64decode(v["UserData"]).decode()
    parts = email.message_from_string(ud).get_payload()
    cfg = yaml.safe_load(parts[-1].get_payload())
    assert cfg["spec"]["kubelet"]["config"]["maxPods"] == 29
    tags = {t["Key"]: t["Value"] for t in env.ec2.describe_launch_templates(LaunchTemplateIds=[lt["id"]])["LaunchTemplates"][0]["Tags"]}
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default" and tags["eks:eks-cluster-name"] == CLUSTER and tags["team"] == "ml"


def test_ensure_for_groups_by_ami_and_max_pods(env):
    r = resolver(env).resolve(nodeclass())
    lts = LaunchTemplates(env.ec2, CLUSTER)
    its = [_it("m5.large", pods=29), _it("m5.xlarge", pods=58), _it("c5.large", pods=29), _it("m6g.large", "arm64", 29), _it("g5.xlarge", gpu=1, pods=58)]
    refs = lts.ensure_for(r, INFO, its, LABELS, [], [], "on-demand")
    assert refs["m5.large"] == refs["c5.large"]  # same AMI, same max pods
    assert refs["m5.large"].name != refs["m5.xlarge"].name  # max pods differ
    assert refs["m6g.large"].image_id == r.ami_for(ARM := {"kubernetes.io/arch": "arm64"}).id
    assert "nvidia" in next(a.name for a in r.amis if a.id == refs["g5.xlarge"].image_id)
    assert lts.created == 4 and len(_all_lts(env.ec2)) == 4


def test_already_exists_race_is_handled(env):
    r = resolver(env).resolve(nodeclass())
    opts = options_for(r, INFO, r.amis[0], LABELS, [], [], 29)
    other = LaunchTemplates(env.ec2, CLUSTER)
    lts = LaunchTemplates(env.ec2, CLUSTER)
    # another invocation creates the template between our describe and our create
    calls = []

    def create_first(params, **kwargs):
        if not calls:
            calls.append(1)
            other.ensure(opts)

    env.ec2.meta.events.register("provide-client-params.ec2.CreateLaunchTemplate", create_first)
    try:
        got = lts.ensure(opts)
    finally:
        env.ec2.meta.events.unregister("provide-client-params.ec2.CreateLaunchTemplate", create_first)
    assert got == other.ensure(opts) and lts.created == 0 and len(_all_lts(env.ec2)) == 1


def test_other_errors_surface_and_delete_for_nodeclass(env):
    r = resolver(env).resolve(nodeclass())
    lts = LaunchTemplates(env.ec2, CLUSTER)
    lts.ensure(options_for(r, INFO, r.amis[0], LABELS, [], [], 29))
    lts.ensure(options_for(r, INFO, r.amis[0], LABELS, [], [], 30))
    r2 = resolver(env).resolve(nodeclass("other"))
    lts.ensure(options_for(r2, INFO, r2.amis[0], LABELS, [], [], 29))
    assert len(lts.delete_for_nodeclass("default")) == 2
    assert len(_all_lts(env.ec2)) == 1
    # an error other than NotFound / AlreadyExists surfaces with EC2's code
    class Http:
        status_code = 403

    def deny(**kwargs):
        return Http(), {"Error": {"Code": "UnauthorizedOperation", "Message": "not allowed"}}

    env.ec2.meta.events.register("before-call.ec2.DescribeLaunchTemplates", deny)
    try:
        with pytest.raises(botocore.exceptions.ClientError, match="UnauthorizedOperation"):
            LaunchTemplates(env.ec2, CLUSTER).ensure(options_for(r, INFO, r.amis[0], LABELS, [], [], 31))
    finally:
        env.ec2.meta.events.unregister("before-call.ec2.DescribeLaunchTemplates", deny)


def test_block_device_conversion():
    out = ec2_block_device_mappings([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "1500Mi", "volumeType": "io2", "iops": 3000,
                                                                         "throughput": 125, "kmsKeyID": "k", "deleteOnTermination": True}}])
    assert out == [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 2, "VolumeType": "io2", "KmsKeyId": "k", "Iops": 3000,
                                                       "Throughput": 125, "DeleteOnTermination": True}}]


def test_other_kubelet_configuration_fields_reach_the_al2023_nodeconfig(env):
    """Karpenter v1.15's extended KubeletConfiguration: the launch template's NodeConfig carries them as given."""
    extra = {"containerLogMaxSize": "50Mi", "serializeImagePulls": False, "featureGates": {"InPlacePodVerticalScaling": True}}
    r = resolver(env).resolve(nodeclass(kubelet={"maxPods": 40, **extra}))
    lt = LaunchTemplates(env.ec2, CLUSTER).ensure(options_for(r, INFO, r.ami_for(_it("m5.large")), LABELS, [], [], 40))
    v = env.ec2.describe_launch_template_versions(LaunchTemplateId=lt["id"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    parts = email.message_from_string(base64.b64decode(v["UserData"]).decode()).get_payload()
    cfg = yaml.safe_load(parts[-1].get_payload())["spec"]["kubelet"]["config"]
    assert {k: cfg.get(k) for k in extra} == extra and cfg["maxPods"] == 40
