"""Issue 21: the launch path and garbage collection keep instances and NodeClaims together.

* a launched instance whose NodeClaim was never marked Launched is adopted, not orphaned (#2);
* garbage collection goes by providerID, and only touches this deployment's instances (#2, #3);
* a registered NodeClaim whose instance left the tag-filtered list has the instance terminated first (#8);
* registration never puts back a startup taint an agent removed meanwhile (#7);
* a deleted EC2NodeClass's launch templates and instance profile are removed (#10).
"""

from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplateOptions, LaunchTemplates
from karpenter_lambda.adapters.aws.nodeclass_resolver import NodeClassResolver
from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.api.labels import OWNER_TAG
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.controllers.lifecycle import Lifecycle
from karpenter_lambda.controllers.provision import Provisioner
from karpenter_lambda.sim.nodes import set_node_ready
from karpenter_lambda.sim.world import make_pod

STARTUP = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


def launch_one(world, name="web-0"):
    world.provision(world.sqs_event(world.add_pods([make_pod(name)])))
    (inst,) = world.instances()
    (nc,) = world.store.list("NodeClaim")
    return inst, nc


def state_of(world, iid):
    return world.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["State"]["Name"]


def run_tagged(world, tags: dict) -> str:
    image = world.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    return world.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large",
                                   TagSpecifications=spec)["Instances"][0]["InstanceId"]


class FailingUpdates:
    """The real store, whose ``update`` fails (a DynamoDB error right after CreateFleet)."""

    def __init__(self, store):
        self._store = store

    def update(self, *a, **kw):
        raise RuntimeError("DynamoDB: ProvisionedThroughputExceededException (injected)")

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_instance_launched_but_not_recorded_is_adopted_not_orphaned(world):
    pods = world.add_pods([make_pod("web-0")])
    provisioner = Provisioner(FailingUpdates(world.store), world.env.kube, AWSCloudProvider.from_environment(world.env),
                              world.env.claims)
    report = provisioner.provision(pods)        # the instance launches; marking the NodeClaim Launched fails
    (inst,) = world.instances()
    assert [x.instance_id for x in report.launched] == [inst["InstanceId"]]
    (nc,) = world.store.list("NodeClaim")       # not rolled back
    assert not nc.status.get("providerID")
    world.clock.advance(40)
    report = world.sweep()
    assert report["adopted"] == [{"nodeClaim": nc.name, "instanceId": inst["InstanceId"]}]
    assert report["terminated"] == [] and report["deleted"] == []
    nc = world.store.get("NodeClaim", nc.name)
    assert nc.status["providerID"] == f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}"
    assert nc.is_true("Launched") and nc.labels["node.kubernetes.io/instance-type"] == inst["InstanceType"]
    assert nc.status.get("allocatable")       # from the catalog, as the launcher writes it
    world.clock.advance(6 * 60)                 # past the 5-minute launch timeout: kept, it has its instance now
    report = world.sweep()
    assert report["deleted"] == [] and report["terminated"] == []
    assert state_of(world, inst["InstanceId"]) == "running"
    # and it registers as usual
    world.join(world.instances()[0], ready=True)
    assert [r["nodeClaim"] for r in world.sweep()["registered"]] == [nc.name]


def test_nodeclaim_without_instance_is_still_deleted_after_5m(world):
    inst, nc = launch_one(world)
    world.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])

    def forget(obj):
        obj.status.pop("providerID", None)
        return obj

    world.store.update("NodeClaim", nc.name, forget)
    world.clock.advance(6 * 60)
    report = world.sweep()
    assert report["adopted"] == []
    assert [d["nodeClaim"] for d in report["deleted"]] == [nc.name]
    assert "no instance is tagged for it" in report["deleted"][0]["reason"]


def test_gc_goes_by_provider_id_not_by_the_name_tag(world):
    inst, nc = launch_one(world)
    # a second instance carrying the same NodeClaim name (a replayed or re-planned launch): no NodeClaim runs on it
    extra = run_tagged(world, {f"kubernetes.io/cluster/{world.cluster}": "owned", OWNER_TAG: world.cluster,
                               "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": nc.name})
    world.clock.advance(35)
    report = world.sweep()
    assert [t["instanceId"] for t in report["terminated"]] == [extra]
    assert f"NodeClaim {nc.name} runs on {inst['InstanceId']}" in report["terminated"][0]["reason"]
    assert state_of(world, inst["InstanceId"]) == "running"
    assert world.store.get("NodeClaim", nc.name) is not None


def test_upstream_karpenter_instances_are_never_touched(world):
    """Karpenter tags its instances with the cluster tag and karpenter.sh/nodeclaim too: only the owner tag counts."""
    inst, nc = launch_one(world)
    theirs = run_tagged(world, {f"kubernetes.io/cluster/{world.cluster}": "owned", "karpenter.sh/nodepool": "default",
                                "karpenter.sh/nodeclaim": "default-upstream"})
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags[OWNER_TAG] == world.cluster
    world.clock.advance(35 * 60)
    report = world.sweep()
    assert theirs not in [t["instanceId"] for t in report["terminated"]]
    assert state_of(world, theirs) == "running"
    # and terminate refuses it even when asked directly
    cloud = AWSCloudProvider.from_environment(world.env)
    try:
        cloud.terminate([theirs])
    except Exception as e:
        assert OWNER_TAG in str(e) and theirs in str(e)
    else:
        raise AssertionError("terminate of a foreign instance did not refuse")
    assert state_of(world, theirs) == "running"


def test_registered_nodeclaim_missing_from_the_list_has_its_instance_terminated(world):
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    world.sweep()
    world.ec2.delete_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": "karpenter.sh/nodeclaim"}])
    set_node_ready(world.server, node["metadata"]["name"], False)
    report = world.sweep()
    assert [d["nodeClaim"] for d in report["deleted"]] == [nc.name]
    assert [t["instanceId"] for t in report["terminated"]] == [inst["InstanceId"]]
    assert state_of(world, inst["InstanceId"]) in ("shutting-down", "terminated")


class AgentAfterListing(KubeClient):
    """A real client of the local API server; right after the sweep lists the nodes, the startup-taint agent removes
    its taint, and right after the first read of the node another writer changes it (the first write meets 409)."""

    node: str = ""
    server = None
    reads = 0

    def list_nodes(self, *a, **kw):
        out = super().list_nodes(*a, **kw)
        node = self.server.store.get("nodes", self.node)
        taints = [t for t in node["spec"].get("taints") or [] if t["key"] != STARTUP["key"]]
        self.server.store.patch("nodes", self.node, {"spec": {"taints": taints}})
        return out

    def get_node(self, name):
        got = super().get_node(name)
        self.reads += 1
        if self.reads == 1:  # a concurrent writer (e.g. the kubelet) moves the resourceVersion
            self.server.store.patch("nodes", name, {"metadata": {"labels": {"example.com/touched": "yes"}}})
        return got


def test_registration_never_re_adds_a_startup_taint_removed_meanwhile(world):
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True, remove_startup_taints=False)
    name = node["metadata"]["name"]
    assert any(t["key"] == STARTUP["key"] for t in node["spec"]["taints"])
    kube = AgentAfterListing.from_host(world.url)
    kube.node, kube.server = name, world.server
    lifecycle = Lifecycle(world.store, AWSCloudProvider.from_environment(world.env), kube, world.cluster,
                          claims=world.env.claims)
    report = lifecycle.sweep()
    assert [r["nodeClaim"] for r in report.registered] == [nc.name]
    after = world.server.store.get("nodes", name)
    keys = {t["key"] for t in after["spec"].get("taints") or []}
    assert STARTUP["key"] not in keys                      # the agent's removal stands
    assert "dedicated" in keys and "karpenter.sh/unregistered" not in keys
    assert after["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert after["metadata"]["labels"]["example.com/touched"] == "yes"   # the concurrent write was kept too
    patches = [code for _m, path, code in world.server.requests("PATCH", f"/nodes/{name}$")]
    assert patches[:2] == [409, 200]                        # the first write met 409 Conflict and was redone


def test_deleted_nodeclass_templates_and_instance_profile_are_removed(world):
    cloud = AWSCloudProvider.from_environment(world.env)
    lts = LaunchTemplates(world.ec2, world.cluster)
    opts = LaunchTemplateOptions(cluster_name=world.cluster, nodeclass_name="old", image_id="ami-12345678",
                                 user_data="#!/bin/sh", instance_profile=None, security_group_ids=[])
    mine = lts.ensure(opts)["name"]
    # an upstream Karpenter template for a nodeclass of the same name: same name prefix, no owner tag
    theirs = world.ec2.create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/upstream-1", LaunchTemplateData={"ImageId": "ami-12345678"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [
            {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": "old"},
            {"Key": f"kubernetes.io/cluster/{world.cluster}", "Value": "owned"}]}])["LaunchTemplate"]["LaunchTemplateName"]
    resolver = NodeClassResolver(world.ec2, world.env.ssm, world.env.iam, world.cluster, "1.31", world.region)
    profile, err = resolver.resolve_instance_profile("old", {"role": "KarpenterNodeRole-test"}, {})
    assert profile and not err
    inst, nc = launch_one(world)   # the existing "default" EC2NodeClass's templates must stay
    world.clock.advance(35)
    report = world.sweep()
    assert report["cleaned"] == [{"nodeClass": "old", "launchTemplates": [mine], "instanceProfile": profile}]
    names = {lt["LaunchTemplateName"] for lt in world.ec2.describe_launch_templates()["LaunchTemplates"]}
    assert mine not in names and theirs in names
    assert any(n.startswith("karpenter.k8s.aws/") and n != theirs for n in names)   # default's template
    profiles = {p["InstanceProfileName"] for p in world.env.iam.list_instance_profiles()["InstanceProfiles"]}
    assert profile not in profiles
    assert world.sweep()["cleaned"] == []


def test_a_node_is_not_initialized_while_a_known_ephemeral_taint_remains(world):
    """Karpenter's KnownEphemeralTaintsRemoved: Ready, startup taints gone, but the cloud provider's uninitialized
    taint (or a readiness.k8s.io/ one) still there -> not Initialized yet; once it goes, Initialized."""
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    name = node["metadata"]["name"]
    taints = list(node["spec"].get("taints") or []) + [
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "readiness.k8s.io/cni", "effect": "NoSchedule"}]
    world.server.store.patch("nodes", name, {"spec": {"taints": taints}})
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Registered")
    assert not world.store.get("NodeClaim", nc.name).is_true("Initialized")
    left = [t for t in world.server.store.get("nodes", name)["spec"]["taints"]
            if not t["key"].startswith(("node.cloudprovider", "readiness.k8s.io"))]
    world.server.store.patch("nodes", name, {"spec": {"taints": left}})
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")


def test_a_taint_of_an_ephemeral_key_with_another_effect_does_not_hold_initialization(world):
    """Karpenter matches its KnownEphemeralTaints on key and effect (corev1 MatchTaint): the uninitialized key with
    PreferNoSchedule is an ordinary taint, so the Ready node initializes (before, any taint of the key held it)."""
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    name = node["metadata"]["name"]
    taints = list(node["spec"].get("taints") or []) + [
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "false", "effect": "PreferNoSchedule"}]
    world.server.store.patch("nodes", name, {"spec": {"taints": taints}})
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")
