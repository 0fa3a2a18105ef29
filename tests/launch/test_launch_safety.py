"""Issue 21 on the launch path (moto): the owner tag, a launched instance is never turned into a failure, throttling
is not insufficient capacity, an ambiguous error stays ambiguous, the instance-type filter fails closed, and the
AWS clients retry and time out."""

import copy

import pytest
from botocore.exceptions import ReadTimeoutError

from karpenter_lambda.adapters.aws.fleet import FleetLauncher, FleetLaunchError, LaunchThrottled
from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplateOptions, LaunchTemplates
from karpenter_lambda.adapters.aws.unavailable import UnavailableOfferings
from karpenter_lambda.api.labels import OWNER_TAG
from karpenter_lambda.cloudprovider.launch import candidates_for

from .conftest import CLUSTER, nodeclass, resolver
from .test_fleet import Http, _request, launch_env  # noqa: F401  (fixture)


def _tags(spec: dict) -> dict:
    return {t["Key"]: t["Value"] for t in spec["Tags"]}


def test_instances_and_launch_templates_carry_the_owner_tag(launch_env):
    le, env = launch_env, launch_env["env"]
    res = FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    p = le["captured"][-1]
    assert all(_tags(s)[OWNER_TAG] == CLUSTER for s in p["TagSpecifications"])
    inst = env.ec2.describe_instances(InstanceIds=[res.instance_id])["Reservations"][0]["Instances"][0]
    assert {t["Key"]: t["Value"] for t in inst["Tags"]}[OWNER_TAG] == CLUSTER
    lt = env.ec2.describe_launch_templates(LaunchTemplateNames=[le["refs"]["m5.large"].name])["LaunchTemplates"][0]
    assert {t["Key"]: t["Value"] for t in lt["Tags"]}[OWNER_TAG] == CLUSTER
    opts = LaunchTemplateOptions(cluster_name=CLUSTER, nodeclass_name="default", image_id="ami-1", user_data="x",
                                 instance_profile=None, security_group_ids=[])
    req = LaunchTemplates(None, CLUSTER).request(opts)
    assert all(_tags(s)[OWNER_TAG] == CLUSTER for s in req["TagSpecifications"] + req["LaunchTemplateData"]["TagSpecifications"])


UPSTREAM_LIST = [{"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]},
                 {"Name": "tag-key", "Values": ["karpenter.k8s.aws/ec2nodeclass"]},
                 {"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}]   # upstream Karpenter's instance List


def test_beside_karpenter_instances_are_invisible_to_its_instance_list(launch_env):
    le, env = launch_env, launch_env["env"]
    normal = FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le)).instance_id
    beside = FleetLauncher(env.ec2, CLUSTER, le["cache"], beside_karpenter=True).launch(_request(le, name="default-b")).instance_id
    listed = {i["InstanceId"] for r in env.ec2.describe_instances(Filters=UPSTREAM_LIST)["Reservations"] for i in r["Instances"]}
    assert normal in listed and beside not in listed
    inst = env.ec2.describe_instances(InstanceIds=[beside])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags[OWNER_TAG] == CLUSTER and tags["karpenter.sh/nodepool"] == "default"
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned" and tags["karpenter.sh/nodeclaim"] == "default-b"


def test_failing_ice_cache_write_never_fails_a_launched_instance(launch_env):
    """The fleet launched an instance and reported ICE for another offering; the cache table is unreachable."""
    le, env = launch_env, launch_env["env"]
    broken = UnavailableOfferings(table_name="no-such-table", cluster_name=CLUSTER, client=env.ddb, clock=le["clock"])

    def add_error(parsed, **kwargs):
        parsed.setdefault("Errors", []).append({
            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.xlarge", "AvailabilityZone": "us-east-1b"}},
            "Lifecycle": "on-demand", "ErrorCode": "InsufficientInstanceCapacity", "ErrorMessage": "no capacity"})

    env.ec2.meta.events.register("after-call.ec2.CreateFleet", add_error)
    res = FleetLauncher(env.ec2, CLUSTER, broken).launch(_request(le))
    assert res.instance_id.startswith("i-") and res.instance_type == "m5.large"
    assert res.errors[0]["code"] == "InsufficientInstanceCapacity"


@pytest.mark.parametrize("where", ["call", "errors"])
def test_throttling_is_not_a_capacity_error(launch_env, where):
    le, env = launch_env, launch_env["env"]

    def throttle(**kwargs):
        if where == "call":
            return Http(400), {"Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."}}
        return Http(200), {"FleetId": "fleet-x", "Instances": [], "Errors": [{
            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a"}},
            "Lifecycle": "on-demand", "ErrorCode": "RequestLimitExceeded", "ErrorMessage": "Request limit exceeded."}]}

    env.ec2.meta.events.register("before-call.ec2.CreateFleet", throttle)
    with pytest.raises(LaunchThrottled, match="RequestLimitExceeded"):
        FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    assert le["cache"].all() == set()   # no offering is marked unavailable for EC2's rate limit


def test_a_timeout_is_not_reported_as_a_failed_launch(launch_env):
    """A read timeout after the request was sent: EC2 may have launched; it must not look like 'nothing launched'."""
    le, env = launch_env, launch_env["env"]

    def timeout(**kwargs):
        raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com")

    env.ec2.meta.events.register("before-call.ec2.CreateFleet", timeout)
    with pytest.raises(ReadTimeoutError) as ei:
        FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    assert not isinstance(ei.value, FleetLaunchError)


class _Broken:
    """Requirements whose evaluation raises (a malformed requirement)."""

    def __contains__(self, key):
        return True

    def get(self, key):
        raise ValueError("malformed requirement")


class _Plan:
    def __init__(self, types, requirements):
        self.instance_types = types
        self.requirements = requirements


def test_instance_type_filter_fails_closed(env):
    from .test_fleet import _types

    r = resolver(env).resolve(nodeclass())
    assert candidates_for(_Plan(_types(2), _Broken()), r, set()) == {}
    assert candidates_for(_Plan(_types(2), {}), r, set())   # without requirements: every offering


def test_aws_clients_retry_and_time_out(monkeypatch):
    from karpenter_lambda.controllers import environment, runtime

    env = {"KARPENTER_LAMBDA_CLUSTER": "c1", "AWS_REGION": "us-east-1"}
    e = environment.Environment(runtime.Config.from_env(env))
    for client in (e.ec2, e.ssm, e.iam, e.dynamodb):
        cfg = client.meta.config
        assert cfg.retries["mode"] == "standard" and cfg.retries["total_max_attempts"] == 3
        assert cfg.connect_timeout == 3.0 and cfg.read_timeout == 15.0
        # worst case of one call stays below the shortest function timeout (60 s)
        assert cfg.retries["total_max_attempts"] * (cfg.connect_timeout + cfg.read_timeout) < 60
    tuned = runtime.Config.from_env({**env, "KARPENTER_LAMBDA_AWS_RETRY_MODE": "adaptive",
                                     "KARPENTER_LAMBDA_AWS_READ_TIMEOUT_SECONDS": "8"})
    cfg = environment.Environment(tuned).ec2.meta.config
    assert cfg.retries["mode"] == "adaptive" and cfg.read_timeout == 8.0
    with pytest.raises(ValueError, match="KARPENTER_LAMBDA_AWS_MAX_ATTEMPTS must be a positive number"):
        runtime.Config.from_env({**env, "KARPENTER_LAMBDA_AWS_MAX_ATTEMPTS": "zero"})
    with pytest.raises(ValueError, match="KARPENTER_LAMBDA_AWS_RETRY_MODE must be standard or adaptive"):
        runtime.Config.from_env({**env, "KARPENTER_LAMBDA_AWS_RETRY_MODE": "legacy"})
    assert runtime.Config.from_env({**env, "KARPENTER_LAMBDA_BESIDE_KARPENTER": "true"}).beside_karpenter
    assert not runtime.Config.from_env(env).beside_karpenter
    with pytest.raises(ValueError, match="KARPENTER_LAMBDA_BESIDE_KARPENTER must be true or false"):
        runtime.Config.from_env({**env, "KARPENTER_LAMBDA_BESIDE_KARPENTER": "yes please"})
