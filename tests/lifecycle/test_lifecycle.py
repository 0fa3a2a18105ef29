"""The real lifecycle handler: liveness, garbage collection, stale launch claims."""

from karpenter_lambda.sim.nodes import set_node_ready
from karpenter_lambda.sim.world import make_pod


def launch_one(world, name="web-0"):
    world.provision(world.sqs_event(world.add_pods([make_pod(name)])))
    (inst,) = world.instances()
    (nc,) = world.store.list("NodeClaim")
    return inst, nc


def test_orphan_instances_are_terminated_after_30s(world):
    image = world.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [{"Key": f"kubernetes.io/cluster/{world.cluster}", "Value": "owned"}, {"Key": "karpenter.sh/nodeclaim", "Value": "ghost"},
            {"Key": "karpenter-lambda.io/cluster", "Value": world.cluster}]  # this deployment's (issue 21 #3)
    orphan = world.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large",
                                     TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0]["InstanceId"]
    other = world.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large")["Instances"][0]["InstanceId"]
    world.clock.advance(10)
    assert world.sweep()["terminated"] == []  # too young: may be a launch whose NodeClaim is being written
    world.clock.advance(25)
    report = world.sweep()
    assert [t["instanceId"] for t in report["terminated"]] == [orphan]
    states = {i["InstanceId"]: i["State"]["Name"] for r in world.ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert states[orphan] in ("shutting-down", "terminated")
    assert states[other] == "running"  # not tagged for this cluster: never touched


def test_instances_with_a_nodeclaim_are_kept(world):
    inst, nc = launch_one(world)
    world.clock.advance(120)
    report = world.sweep()
    assert report["terminated"] == [] and report["deleted"] == []
    assert world.store.get("NodeClaim", nc.name) is not None


def test_nodeclaim_whose_instance_vanished_is_deleted(world):
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    world.sweep()
    world.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])
    # as in Karpenter: while the Node still reports Ready its kubelet runs, so nothing is deleted yet
    report = world.sweep()
    assert report["deleted"] == []
    assert world.store.get("NodeClaim", nc.name) is not None
    set_node_ready(world.server, node["metadata"]["name"], False)
    report = world.sweep()
    assert report["deleted"] == [{"nodeClaim": nc.name, "reason": f"instance {inst['InstanceId']} is terminated"}]
    assert world.store.get("NodeClaim", nc.name) is None
    assert world.server.store.get("nodes", node["metadata"]["name"]) is None
    totals, claims = world.env.claims.usage("default")
    assert claims == {} and totals["cpu"] == 0
    assert world.env.claims.reservations() == {}


def test_registration_timeout_terminates_and_deletes(world):
    inst, nc = launch_one(world)
    world.clock.advance(14 * 60)
    report = world.sweep()
    assert report["terminated"] == [] and world.store.get("NodeClaim", nc.name) is not None
    world.clock.advance(2 * 60)
    report = world.sweep()
    assert [t["instanceId"] for t in report["terminated"]] == [inst["InstanceId"]]
    assert report["deleted"][0]["reason"] == "registration timeout"
    assert world.store.get("NodeClaim", nc.name) is None
    # the pod is free again: a new message provisions it anew
    pods = world.server.store.list("pods")
    world.provision(world.sqs_event(pods))
    assert len(world.instances()) == 1 and world.instances()[0]["InstanceId"] != inst["InstanceId"]


def test_stale_launch_claim_without_nodeclaim_is_released(world):
    claims = world.env.claims
    assert claims.commit("default", "crashed-claim", {"cpu": 2000, "nodes": 1}, {"cpu": 4000}, ["uid-1"]).ok
    world.clock.advance(60)
    assert world.sweep()["released"] == []
    world.clock.advance(5 * 60)
    assert world.sweep()["released"] == ["crashed-claim"]
    assert claims.usage("default")[1] == {}
    assert claims.reservations() == {}


def test_unregistered_nodeclaim_survives_an_instance_missing_from_describe(world):
    """EC2 is eventually consistent: a just-launched instance can be missing from a (tag-filtered)
    DescribeInstances.  An unregistered NodeClaim is not deleted for that (its pods would be launched
    again and the first instance become an orphan); the registration timeout cleans it up."""
    inst, nc = launch_one(world)
    iid = inst["InstanceId"]
    # hide the instance from the sweep's tag-filtered describe, as a lagging describe would
    world.ec2.delete_tags(Resources=[iid], Tags=[{"Key": "karpenter.sh/nodeclaim"}])
    world.clock.advance(5)
    report = world.sweep()
    assert report["deleted"] == [] and report["terminated"] == []
    assert world.store.get("NodeClaim", nc.name) is not None
    # a redelivered message launches nothing new: the pod is still nominated to the NodeClaim
    world.provision(world.sqs_event(world.server.store.list("pods")))
    assert [i["InstanceId"] for i in world.ec2.describe_instances()["Reservations"][0]["Instances"]] == [iid]
    world.clock.advance(16 * 60)
    report = world.sweep()
    assert [d["nodeClaim"] for d in report["deleted"]] == [nc.name]
    assert "not registered within 15m" in report["deleted"][0]["reason"]
    assert world.store.get("NodeClaim", nc.name) is None


def test_registered_nodeclaim_whose_instance_is_absent_is_deleted(world):
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Registered")
    world.ec2.delete_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": "karpenter.sh/nodeclaim"}])
    assert world.sweep()["deleted"] == []  # the Node is still Ready: its kubelet runs
    set_node_ready(world.server, node["metadata"]["name"], False)
    report = world.sweep()
    assert report["deleted"] == [{"nodeClaim": nc.name, "reason": f"instance {inst['InstanceId']} is gone"}]
    assert world.server.store.get("nodes", node["metadata"]["name"]) is None


def test_a_deleted_node_takes_its_nodeclaim_and_instance_with_it(world):
    """kubectl delete node: as Karpenter, deleting the node deletes its NodeClaim -- the instance is terminated, not
    left running with no node and nothing managing it (before: the NodeClaim stayed, the instance ran on).  The Node
    holds Karpenter's termination finalizer: it stays, deleting, until the instance is terminated, then goes.
    (With pods and a PodDisruptionBudget: tests/termination/test_node_deletion.py.)"""
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    name = node["metadata"]["name"]
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Registered")
    assert world.server.store.get("nodes", name)["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    world.clock.advance(60)
    assert world.sweep()["deleted"] == []                     # node there: nothing happens
    world.server.store.delete("nodes", name)
    assert world.server.store.get("nodes", name)["metadata"]["deletionTimestamp"]   # held by the finalizer
    world.clock.advance(60)
    report = world.sweep()
    assert report["deleted"] == [{"nodeClaim": nc.name, "reason": f"NodeDeleted: node {name} was deleted"}]
    assert world.store.get("NodeClaim", nc.name) is None
    states = {i["InstanceId"]: i["State"]["Name"] for r in world.ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert states[inst["InstanceId"]] == "terminated"
    assert world.server.store.get("nodes", name) is None      # released once the instance was terminated


def test_a_node_deleted_before_it_had_the_finalizer_goes_at_once_and_takes_its_nodeclaim(world):
    """A Node without the finalizer (deleted before a sweep put it there) goes at once, as before: the sweep finds it
    gone (a read by name: 404) and deletes its NodeClaim, terminating the instance."""
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    name = node["metadata"]["name"]
    world.sweep()
    world.server.store.patch("nodes", name, {"metadata": {"finalizers": None}}, patch_type="merge")
    world.server.store.delete("nodes", name)
    assert world.server.store.get("nodes", name) is None
    world.clock.advance(60)
    report = world.sweep()
    assert report["deleted"] == [{"nodeClaim": nc.name, "reason": f"NodeDeleted: node {name} was deleted"}]
    states = {i["InstanceId"]: i["State"]["Name"] for r in world.ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert states[inst["InstanceId"]] in ("shutting-down", "terminated")


def test_a_nodeclaim_the_user_deleted_gets_capacity_for_its_pods_before_its_drain(world):
    """``karpenter-lambda delete nodeclaim`` (as ``kubectl delete nodeclaim``): Karpenter's provisioner counts the pods
    of a deleting node as pending, so their capacity launches before they are evicted; here the lifecycle sweep that
    drains the NodeClaim first launches that capacity (controllers/leaving.py), once."""
    from karpenter_lambda.api import labels as wk
    from karpenter_lambda.controllers.termination import USER_DELETED, request_deletion
    from karpenter_lambda.sim.world import make_pod

    pods = world.add_pods([make_pod(f"web-{i}", cpu="500m", memory="512Mi", owner="web") for i in range(2)])
    world.provision(world.sqs_event(pods))
    (inst,) = world.instances()
    node = world.join(inst, ready=True)
    world.sweep()
    world.schedule()
    (nc,) = world.store.list("NodeClaim")
    assert nc.is_true("Initialized")
    assert sum(1 for p in world.server.store.list("pods") if p["spec"].get("nodeName") == node["metadata"]["name"]) == 2
    request_deletion(world.store, nc.name, USER_DELETED, world.clock.now())
    report = world.sweep()
    (ahead,) = report["launched_ahead"]
    assert ahead["nodeClaim"] == nc.name and len(ahead["replacements"]) == 1
    new = world.store.get("NodeClaim", ahead["replacements"][0])
    assert wk.decode_replaces(new.annotations.get(wk.REPLACES_ANNOTATION)) == [nc.name]
    running = {i["InstanceId"] for i in world.instances()}
    assert any(new.status["providerID"].endswith(i) for i in running)   # launched in the sweep that drained the node
    # the drain waits for the replacement (the instance is not going away on its own): the node is tainted, no pod
    # is evicted while the replacement is not Initialized
    world.clock.advance(60)
    report = world.sweep()
    assert report["launched_ahead"] == [] and report["evicted"] == [] and {i["InstanceId"] for i in world.instances()} == running
    assert report["held"] == [{"nodeClaim": nc.name, "node": node["metadata"]["name"], "replacements": [new.name]}]
    # `disruption plan` says why the node is still there
    from karpenter_lambda.controllers.disrupt import DisruptionSweep

    (row,) = [r for r in DisruptionSweep.from_environment(world.env, "consolidation").preview() if r["nodeClaim"] == nc.name]
    assert row["decision"] == "keep" and row["detail"] == (f"deleting ({USER_DELETED}); drain waits for replacement(s) "
                                                           f"{new.name} to initialize"), row
    assert world.store.get("NodeClaim", nc.name).status["termination"]["waitingFor"] == [new.name]
    assert any(t["key"] == wk.DISRUPTED_TAINT["key"] for t in world.server.store.get("nodes", node["metadata"]["name"])["spec"]["taints"])
    # the replacement joins and is Ready: the sweep that initializes it drains the old node, and the pods move once
    (new_inst,) = [i for i in world.instances() if new.status["providerID"].endswith(i["InstanceId"])]
    world.join(new_inst, ready=True)
    world.clock.advance(60)
    report = world.sweep()
    assert {e["pod"].split("/")[1] for e in report["evicted"]} == {"web-0", "web-1"}
    world.clock.advance(60)
    assert world.sweep()["launched_ahead"] == [] and {i["InstanceId"] for i in world.instances()} == running - {inst["InstanceId"]}
