"""Issue 30 item 7: ``instanceStorePolicy: RAID0`` in the user data of every AMI family, as karpenter-provider-aws
writes it (AL2 bootstrap.sh ``--local-disks raid0``, AL2023 nodeadm ``instance.localStorage.strategy: RAID0``,
Bottlerocket ``settings.bootstrap-commands`` with ``apiclient ephemeral-storage``, the bind command by the Bottlerocket
version: ``pkg/providers/version.SupportsDefaultBind``); Windows and Custom unchanged."""

import base64
import tomllib
from types import SimpleNamespace

import pytest
import yaml

from karpenter_lambda.adapters.aws.ssm_seed import add_image
from karpenter_lambda.adapters.aws.userdata import (
    ClusterInfo,
    bottlerocket_version,
    parse_mime_parts,
    render_user_data,
    supports_default_bind,
)
from karpenter_lambda.api import labels as wk
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.cloudprovider.launch import launch
from karpenter_lambda.cloudprovider.types import CreateRequest
from karpenter_lambda.scheduling.requirements import Requirements

from .conftest import CLUSTER as CLUSTER_NAME
from .conftest import REGION, nodeclass, resolver

CLUSTER = ClusterInfo(name="c1", endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com", ca_b64="Y2E=", cidr="10.100.0.0/16")


def _render(family, policy, **kw):
    return render_user_data(family, CLUSTER, None, {"karpenter.sh/nodepool": "p"}, [], [], {}, 29, None,
                            instance_store_policy=policy, **kw)


def test_al2_bootstrap_builds_the_array():
    text = _render("AL2", "RAID0")
    script = parse_mime_parts(text)[-1][1]
    assert script.rstrip().endswith(" \\\n--local-disks raid0") and "--local-disks" not in _render("AL2", None)


def test_al2023_nodeconfig_asks_nodeadm_for_raid0():
    parts = parse_mime_parts(_render("AL2023", "RAID0"))
    cfg = yaml.safe_load(parts[-1][1])
    assert cfg["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert "instance" not in yaml.safe_load(parse_mime_parts(_render("AL2023", None))[-1][1])["spec"]


def test_bottlerocket_mounts_the_instance_store_before_the_kubelet():
    doc = tomllib.loads(_render("Bottlerocket", "RAID0"))
    cmd = doc["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert cmd["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert cmd["commands"][1][:3] == ["apiclient", "ephemeral-storage", "bind"]
    assert cmd["mode"] == "always" and cmd["essential"] is True
    assert "bootstrap-commands" not in tomllib.loads(_render("Bottlerocket", None))["settings"]


@pytest.mark.parametrize("family", ["Windows2022", "Custom"])
def test_windows_and_custom_are_unchanged(family):
    assert _render(family, "RAID0") == _render(family, None)


LEGACY_BIND = ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet",
               "/var/log/pods"]
DEFAULT_BIND = ["apiclient", "ephemeral-storage", "bind"]


def _bind(text):
    return tomllib.loads(text)["settings"]["bootstrap-commands"]["000-mount-instance-storage"]["commands"][1]


@pytest.mark.parametrize("version, supported", [
    ("latest", True), ("v1.46.0", True), ("1.46.0", True), ("v1.50.2", True), ("v2.0.0", True),
    ("v1.45.9", False), ("v1.46", False), ("", False), (None, False), ("v20250101", False), ("vx.46.0", False)])
def test_default_bind_from_bottlerocket_1_46(version, supported):
    assert supports_default_bind(version) is supported


def test_bottlerocket_version_alias_then_name_then_id_then_resolved_amis():
    amis = [SimpleNamespace(id="ami-1", name="bottlerocket-aws-k8s-1.33-x86_64-v1.45.0-431fe75a"),
            SimpleNamespace(id="ami-2", name="bottlerocket-aws-k8s-1.33-x86_64-v1.47.1-431fe75a")]
    assert bottlerocket_version([{"alias": "bottlerocket@latest"}], amis) == "latest"
    assert bottlerocket_version([{"alias": "bottlerocket@v1.46.0"}], amis) == "v1.46.0"
    assert bottlerocket_version([{"name": "bottlerocket-aws-k8s-1.33-x86_64-v1.48.0-*"}], amis) == "v1.48.0"
    assert bottlerocket_version([{"id": "ami-2"}], amis) == "v1.47.1"
    assert bottlerocket_version([{"tags": {"team": "a"}}], amis) == "v1.45.0"  # the first resolved Bottlerocket AMI
    assert bottlerocket_version([{"tags": {"team": "a"}}], [SimpleNamespace(id="ami-3", name="my-image-v1.50.0")]) == ""


def test_bottlerocket_bind_command_follows_the_version():
    assert _bind(_render("Bottlerocket", "RAID0")) == LEGACY_BIND  # version unknown: the command every version runs
    assert _bind(_render("Bottlerocket", "RAID0", ami_version="v1.45.0")) == LEGACY_BIND
    assert _bind(_render("Bottlerocket", "RAID0", ami_version="latest")) == DEFAULT_BIND
    assert _bind(_render("Bottlerocket", "RAID0", ami_version="v1.46.0")) == DEFAULT_BIND


def _launch_user_data(env, nc):
    r = resolver(env).resolve(nc)
    it = InstanceType(name="m5d.large", labels={wk.ARCH: "amd64", wk.INSTANCE_TYPE: "m5d.large"}, capacity={"pods": 29},
                      offerings=[Offering(zone="us-east-1a", capacity_type="on-demand", price=0.1)])
    plan = SimpleNamespace(instance_types=[it], requirements=Requirements.from_list(
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]))
    cluster = SimpleNamespace(name=CLUSTER_NAME, endpoint="https://k8s.example", ca_b64="Y2E=", service_cidr="10.100.0.0/16")
    provider = SimpleNamespace(ec2=env.ec2, cluster=cluster, unavailable=None, beside_karpenter=False)
    req = CreateRequest(name="default-b1", plan=plan, nodepool=SimpleNamespace(name="default", taints=[], startup_taints=[]),
                        nodeclass=nc, resolved=r, labels={wk.NODEPOOL: "default"}, client_token="default-b1")
    launch(provider, req)
    (lt,) = env.ec2.describe_launch_templates()["LaunchTemplates"]
    data = env.ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"][0]
    return base64.b64decode(data["LaunchTemplateData"]["UserData"]).decode()


@pytest.mark.parametrize("release, bind", [("v1.45.0", LEGACY_BIND), ("v1.46.1", DEFAULT_BIND)])
def test_launch_reads_the_version_from_the_nodeclass_ami(env, release, bind):
    image = add_image(REGION, name=f"bottlerocket-aws-k8s-1.31-x86_64-{release}-431fe75a", owner_id="123456789012")
    nc = nodeclass(amiFamily="Bottlerocket", amiSelectorTerms=[{"id": image}], instanceStorePolicy="RAID0")
    assert _bind(_launch_user_data(env, nc)) == bind


def test_launch_with_the_latest_bottlerocket_alias_uses_the_default_bind(env):
    nc = nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@latest"}], instanceStorePolicy="RAID0")
    assert _bind(_launch_user_data(env, nc)) == DEFAULT_BIND
