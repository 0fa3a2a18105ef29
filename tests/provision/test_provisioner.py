"""The real provisioner handler on real SQS events, against moto and the local Kubernetes API."""

import base64
import email
import json

import yaml

from karpenter_lambda.controllers.provision import NOMINATED_PODS_ANNOTATION

from karpenter_lambda.sim.world import make_pod


def capture_fleet_requests(world):
    calls = []

    def hook(params, **kwargs):
        calls.append(params)

    world.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", hook)
    return calls


def test_pending_pods_to_ready_nodes(world):
    fleet_calls = capture_fleet_requests(world)
    pods = world.add_pods([make_pod(f"web-{i}") for i in range(3)])
    resp = world.provision(world.sqs_event(pods))
    assert resp == {"batchItemFailures": []}

    claims = world.store.list("NodeClaim")
    assert len(claims) >= 1
    instances = world.instances()
    assert len(instances) == len(claims)
    nominated = sorted(p for c in claims for p in json.loads(c.annotations[NOMINATED_PODS_ANNOTATION]))
    assert nominated == ["default/web-0", "default/web-1", "default/web-2"]

    # CreateFleet request: instant, on-demand lowest-price, <= 60 overrides over the resolved subnets
    assert fleet_calls, "CreateFleet was not called"
    req = fleet_calls[0]
    assert req["Type"] == "instant"
    assert req["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert req["OnDemandOptions"]["AllocationStrategy"] == "lowest-price"
    overrides = [o for cfg in req["LaunchTemplateConfigs"] for o in cfg["Overrides"]]
    assert 0 < len(overrides) <= 60
    assert all(o["InstanceType"].split(".")[0] in ("m5", "c5", "m6i") for o in overrides)
    subnet_ids = set(world.account.subnet_ids)
    assert {o["SubnetId"] for o in overrides} <= subnet_ids

    # the instance: tags and launch template userData
    inst = instances[0]
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    nc = world.store.get("NodeClaim", tags["karpenter.sh/nodeclaim"])
    assert tags[f"kubernetes.io/cluster/{world.cluster}"] == "owned"
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["eks:eks-cluster-name"] == world.cluster
    assert tags["team"] == "platform"
    lt_name = req["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert lt_name.startswith("karpenter.k8s.aws/")
    version = world.ec2.describe_launch_template_versions(LaunchTemplateName=lt_name)["LaunchTemplateVersions"][0]
    ud = base64.b64decode(version["LaunchTemplateData"]["UserData"]).decode()
    msg = email.message_from_string(ud)
    nodeconfig = [yaml.safe_load(p.get_payload()) for p in msg.walk() if p.get_content_type() == "application/node.eks.aws"]
    assert nodeconfig and nodeconfig[-1]["spec"]["cluster"]["name"] == world.cluster
    assert nodeconfig[-1]["spec"]["cluster"]["apiServerEndpoint"] == world.url
    flags = " ".join(nodeconfig[-1]["spec"]["kubelet"].get("flags", []))
    assert "karpenter.sh/nodepool=default" in flags and "team=platform" in flags
    taints = {(t["key"], t["effect"]) for t in nodeconfig[-1]["spec"]["kubelet"]["config"]["registerWithTaints"]}
    assert taints == {("dedicated", "NoSchedule"), ("example.com/agent-not-ready", "NoSchedule"),
                      ("karpenter.sh/unregistered", "NoExecute")}
    assert nodeconfig[-1]["spec"]["kubelet"]["config"]["maxPods"] > 0

    # NodeClaim written as Launched
    assert nc.is_true("Launched")
    assert nc.status["providerID"] == f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}"
    assert nc.labels["node.kubernetes.io/instance-type"] == inst["InstanceType"]
    assert nc.labels["karpenter.sh/capacity-type"] == "on-demand"
    assert nc.status["imageID"] == inst["ImageId"]

    # nodes join; lifecycle registers (labels/annotations/taints) then initializes once Ready and untainted
    nodes = world.join_all(ready=False)
    report = world.sweep()
    assert {r["nodeClaim"] for r in report["registered"]} == {c.name for c in claims}
    assert report["initialized"] == []
    node = world.server.store.get("nodes", nodes[0]["metadata"]["name"])
    assert node["metadata"]["labels"]["team"] == "platform"
    assert node["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert node["metadata"]["annotations"]["example.com/owner"] == "platform"
    assert any(t["key"] == "dedicated" for t in node["spec"]["taints"])
    assert not any(t["key"] == "karpenter.sh/unregistered" for t in node["spec"]["taints"])
    from karpenter_lambda.sim import nodes as simnodes

    for n in nodes:
        simnodes.set_node_ready(world.server, n["metadata"]["name"], True)
    report = world.sweep()
    assert report["initialized"] == []  # the startup taint is still there
    for n in nodes:
        simnodes.remove_startup_taints(world.server, n["metadata"]["name"], [{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}])
    report = world.sweep()
    assert {r["nodeClaim"] for r in report["initialized"]} == {c.name for c in claims}
    assert all(c.is_true("Initialized") for c in world.store.list("NodeClaim"))

    world.schedule()
    bound = [p for p in world.server.store.list("pods") if p["spec"].get("nodeName")]
    assert len(bound) == 3


def test_duplicate_delivery_launches_nothing(world):
    pods = world.add_pods([make_pod(f"api-{i}", cpu="1") for i in range(2)])
    event = world.sqs_event(pods)
    world.provision(event)
    first = {i["InstanceId"] for i in world.instances()}
    assert first
    resp = world.provision(event)  # the same SQS message delivered again
    assert resp == {"batchItemFailures": []}
    assert {i["InstanceId"] for i in world.instances()} == first
    assert len(world.store.list("NodeClaim")) == len(first)


def test_malformed_body_fails_only_that_record(world):
    pods = world.add_pods([make_pod("ok-0")])
    event = world.sqs_event(pods, bodies=["{not json", json.dumps({"type": "pod", "pod": {"metadata": {"name": "x"}}})])
    bad_ids = {r["messageId"] for r in event["Records"] if "ok-0" not in r["body"]}
    resp = world.provision(event)
    assert {f["itemIdentifier"] for f in resp["batchItemFailures"]} == bad_ids
    assert len(world.instances()) == 1
    assert "body is not JSON" in world.logs.getvalue()
    assert "pod.metadata.uid: required string missing" in world.logs.getvalue()


def test_bound_and_deleted_pods_are_skipped(world):
    pods = world.add_pods([make_pod("a"), make_pod("b")])
    world.server.store.delete("pods", "a", "default")
    world.server.store.create("nodes", {"metadata": {"name": "n1"}})
    world.server.store.bind("default", "b", "n1")
    world.provision(world.sqs_event(pods))
    assert world.instances() == []
    assert world.store.list("NodeClaim") == []


def test_no_nodepool_reports_unschedulable(world):
    from karpenter_lambda.controllers import runtime

    world.store.delete("NodePool", "default")
    reports = []
    runtime.REPORT_HOOKS.append(lambda kind, r: reports.append(r))
    try:
        world.provision(world.sqs_event(world.add_pods([make_pod("lonely")])))
    finally:
        runtime.REPORT_HOOKS.clear()
    assert reports[0].unschedulable == [{"pod": "default/lonely", "reason": "no NodePool exists"}]
    assert world.instances() == []
