"""Issue 22: the cloud provider's own package (protocol with describe, AWSCloudProvider over an InstanceProvider),
and no AWS/Kubernetes client library imported by controllers/."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from karpenter_lambda.api import labels as wk
from karpenter_lambda.cloudprovider import (
    GONE_STATES,
    AWSCloudProvider,
    CloudProvider,
    InstanceProvider,
    NotOwned,
    instance_state,
)
from karpenter_lambda.cloudprovider.types import CreateRequest

from .conftest import CLUSTER

PKG = Path(__file__).resolve().parents[2] / "layers/core/python/karpenter_lambda"
PROTOCOL = ("resolve", "instance_types", "unavailable_offerings", "create", "list_instances", "describe", "terminate",
            "terminate_launched")


def test_the_protocol_is_complete_and_the_aws_provider_implements_it():
    declared = {n for n, v in vars(CloudProvider).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert declared == set(PROTOCOL)
    for name in PROTOCOL:
        assert callable(getattr(AWSCloudProvider, name)), name


def test_create_request_fields_are_typed():
    hints = {f: str(t) for f, t in CreateRequest.__annotations__.items()}
    assert "Any" not in " ".join(hints.values())
    assert hints["nodepool"] == "NodePool" and hints["nodeclass"] == "EC2NodeClass"


def _run(ec2, subnet: str, tags: dict) -> str:
    resp = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large", SubnetId=subnet,
                             TagSpecifications=[{"ResourceType": "instance",
                                                 "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return resp["Instances"][0]["InstanceId"]


def test_instance_provider_lists_describes_and_terminates_only_its_own(env):
    cluster = SimpleNamespace(name=CLUSTER)
    ours_tags = {f"kubernetes.io/cluster/{CLUSTER}": "owned", wk.OWNER_TAG: CLUSTER, wk.NODECLAIM_TAG: "default-abc"}
    ours = _run(env.ec2, env.subnets["a-big"]["id"], ours_tags)
    # upstream Karpenter's instance: the same cluster and NodeClaim tags, not our owner tag
    theirs = _run(env.ec2, env.subnets["a-big"]["id"], {f"kubernetes.io/cluster/{CLUSTER}": "owned",
                                                         wk.NODECLAIM_TAG: "default-xyz"})
    instances = InstanceProvider(env.ec2, cluster)
    assert set(instances.list()) == {ours}
    assert set(instances.instances_of("default-abc")) == {ours} and instances.instances_of("default-xyz") == {}
    assert set(instances.describe([ours, theirs, "i-0000000000000dead"])) == {ours, theirs}
    with pytest.raises(NotOwned, match=theirs):
        instances.terminate([ours, theirs])
    after = instances.describe([ours, theirs])
    assert instance_state(after[ours]) in GONE_STATES and instance_state(after[theirs]) not in GONE_STATES
    inst = InstanceProvider.as_instance(after[ours])
    assert inst.instance_id == ours and inst.instance_type == "m5.large" and inst.zone == "us-east-1a"


def test_the_aws_provider_answers_through_its_instance_provider(env):
    cloud = AWSCloudProvider(env.ec2, env.ssm, env.iam, SimpleNamespace(name=CLUSTER, version="1.31"))
    ours = _run(env.ec2, env.subnets["b"]["id"], {f"kubernetes.io/cluster/{CLUSTER}": "owned", wk.OWNER_TAG: CLUSTER,
                                                 wk.NODECLAIM_TAG: "default-1"})
    assert isinstance(cloud.instances, InstanceProvider)
    assert set(cloud.list_instances()) == {ours} and cloud.owns(cloud.describe([ours])[ours])
    cloud.terminate([ours])
    assert instance_state(cloud.describe([ours])[ours]) in GONE_STATES


@pytest.mark.parametrize("old", ["cloudprovider", "ec2_launch", "catalog_cache", "cloud_types", "claims"])
def test_the_cloud_provider_and_the_stores_have_one_home(old):
    """Moved out of controllers/ (issue 22): no second import path is left behind."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"karpenter_lambda.controllers.{old}")


CLIENT_LIBRARIES = {"boto3", "botocore", "pynamodb", "kubernetes", "moto"}


@pytest.mark.parametrize("package", ["controllers", "cloudprovider"])
def test_no_client_library_imported_outside_adapters(package):
    bad = []
    for path in sorted((PKG / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            bad += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in CLIENT_LIBRARIES]
    assert bad == []


def test_launch_templates_are_kept_for_the_provider_not_per_launch(env):
    """Every launch of one provider (one invocation) shares its LaunchTemplates, whose names already described or
    created are not described again (tests/launch/test_launch_templates.py); a new provider starts empty."""
    instances = InstanceProvider(env.ec2, SimpleNamespace(name=CLUSTER))
    assert instances.templates() is instances.templates()
    assert InstanceProvider(env.ec2, SimpleNamespace(name=CLUSTER)).templates() is not instances.templates()
