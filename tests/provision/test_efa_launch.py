"""EFA end to end (Karpenter's resolver + ``generateNetworkInterfaces``): a pod requesting ``vpc.amazonaws.com/efa``
gets a NodeClaim whose launch template attaches the type's EFA interfaces, the NodeClaim and its Node offer the EFA
devices, the pod's node initializes (the resource registered) and an ordinary NodeClaim offers none (no EFA
interface on it).  The World: moto, the local API server, the real provisioning and lifecycle handlers."""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.kube import node_allocatable
from karpenter_lambda.api.quantity import parse_resource_list
from karpenter_lambda.sim.world import make_pod


def _launch_template_interfaces(world) -> list[dict]:
    """The NetworkInterfaces of every launch template made so far."""
    out = []
    for lt in world.ec2.describe_launch_templates()["LaunchTemplates"]:
        data = world.ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])
        out.append(data["LaunchTemplateVersions"][0]["LaunchTemplateData"]["NetworkInterfaces"])
    return out


def test_an_efa_pod_gets_efa_interfaces_and_a_node_that_offers_them(world):
    efa = make_pod("train", cpu="2", memory="4Gi", owner="train",
                   containers=[{"name": "c", "image": "x", "resources": {
                       "requests": {"cpu": "2", "memory": "4Gi", L.RESOURCE_EFA: "1"},
                       "limits": {L.RESOURCE_EFA: "1"}}}])
    # on the same EFA-capable type, but asking for no EFA
    plain = make_pod("web", cpu="500m", memory="512Mi", owner="web", nodeSelector={L.INSTANCE_TYPE: "m6i.32xlarge"},
                     affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                         {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": L.HOSTNAME}]}})
    pods = world.add_pods([efa])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    (nc,) = world.store.list("NodeClaim")
    assert parse_resource_list(nc.spec["resources"]["requests"])[L.RESOURCE_EFA] == 1
    efas = int(parse_resource_list(nc.status["capacity"])[L.RESOURCE_EFA])
    assert efas >= 1
    # every template of this launch attaches the type's EFA interfaces: one per network card, InterfaceType efa
    templates = _launch_template_interfaces(world)
    assert templates and all(nis and all(n.get("InterfaceType") == "efa" for n in nis) for nis in templates)
    assert all([n["NetworkCardIndex"] for n in nis] == list(range(len(nis))) for nis in templates)
    (node,) = world.join_all()
    assert node_allocatable(node)[L.RESOURCE_EFA] == efas
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")   # the requested resource registered

    # a NodeClaim that requests no EFA: a plain interface, and neither it nor its node offers EFA
    world.server.store.bind("default", "train", node["metadata"]["name"])   # the kube-scheduler bound it
    pods = world.add_pods([plain])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    (o,) = [c for c in world.store.list("NodeClaim") if c.name != nc.name]   # not beside the EFA pod
    assert o.labels[L.INSTANCE_TYPE] == "m6i.32xlarge"
    assert L.RESOURCE_EFA not in o.status["capacity"] and L.RESOURCE_EFA not in o.status["allocatable"]
    assert len(_launch_template_interfaces(world)[-1]) >= 1
    (new,) = [n for n in world.join_all() if n["metadata"]["name"] != node["metadata"]["name"]]
    assert L.RESOURCE_EFA not in node_allocatable(new)
