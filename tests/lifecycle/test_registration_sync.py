"""Registration, initialization and deletion as Karpenter's NodeClaim lifecycle and node termination do them:

* a deleting registered NodeClaim whose instance left the tag-filtered listing (its ``karpenter.sh/nodeclaim`` tag was
  removed) is drained and its instance terminated (node termination's ``finalize``: the drain is skipped only when
  the cloud provider, asked by id, says NotFound);
* ``karpenter.sh/do-not-sync-taints=true`` on the Node: registration syncs no taint onto it (``syncNode``);
* a Custom AMI family (no do-not-sync label from the AWS provider): registration merges the NodeClaim's taints and
  startup taints onto the Node, since the user's userData does not register them;
* initialization waits for every resource the NodeClaim requests to be non-zero in the Node's allocatable
  (``RequestedResourcesRegistered``), not only names with a ``/``.
"""

from karpenter_lambda.api import labels as wk
from karpenter_lambda.controllers.termination import request_deletion
from karpenter_lambda.sim.world import World, scenario_manifests

from test_launch_recovery import STARTUP, launch_one, state_of

UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def _keys(world, name) -> set[str]:
    return {t["key"] for t in world.server.store.get("nodes", name)["spec"].get("taints") or []}


def test_a_deleting_nodeclaim_whose_instance_left_the_listing_is_drained_and_terminated(world):
    inst, nc = launch_one(world)
    node = world.join(inst, ready=True)
    world.sweep()
    world.schedule()
    name = node["metadata"]["name"]
    assert [p["metadata"]["name"] for p in world.server.store.list("pods") if p["spec"].get("nodeName") == name] == ["web-0"]
    world.ec2.delete_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": wk.NODECLAIM_TAG}])
    request_deletion(world.store, nc.name, "Expired: test", world.clock())
    report = world.sweep()
    assert [e["pod"] for e in report["evicted"]] == ["default/web-0"]
    assert state_of(world, inst["InstanceId"]) in ("shutting-down", "terminated")
    assert report["deleted"] == [{"nodeClaim": nc.name, "reason": "Expired: test"}]   # moto: terminated at once
    assert world.store.get("NodeClaim", nc.name) is None and world.server.store.get("nodes", name) is None


def test_do_not_sync_taints_label_leaves_the_node_taints_alone(world):
    inst, nc = launch_one(world)
    name = world.join(inst, ready=True)["metadata"]["name"]
    assert "dedicated" in _keys(world, name)
    node = world.server.store.get("nodes", name)   # the NodePool's taint is gone before registration, label set
    world.server.store.patch("nodes", name, {
        "metadata": {"labels": {wk.NODE_DO_NOT_SYNC_TAINTS: "true"}},
        "spec": {"taints": [t for t in node["spec"]["taints"] if t["key"] != "dedicated"]}})
    assert [r["nodeClaim"] for r in world.sweep()["registered"]] == [nc.name]
    after = world.server.store.get("nodes", name)
    assert "dedicated" not in _keys(world, name) and UNREGISTERED["key"] not in _keys(world, name)
    assert after["metadata"]["labels"][wk.NODE_REGISTERED] == "true"


def test_without_the_label_the_nodeclaim_taints_are_synced(world):
    inst, nc = launch_one(world)
    name = world.join(inst, ready=True)["metadata"]["name"]
    node = world.server.store.get("nodes", name)
    world.server.store.patch("nodes", name, {
        "metadata": {"labels": {wk.NODE_DO_NOT_SYNC_TAINTS: "false"}},
        "spec": {"taints": [t for t in node["spec"]["taints"] if t["key"] != "dedicated"]}})
    world.sweep()
    assert "dedicated" in _keys(world, name)


CUSTOM = scenario_manifests().replace(
    "    - alias: al2023@latest", "    - tags:\n        karpenter.sh/discovery: test-cluster\n  amiFamily: Custom")


def _custom_world():
    w = World(CUSTOM)
    w.__enter__()
    image = w.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    w.ec2.create_tags(Resources=[image], Tags=[{"Key": "karpenter.sh/discovery", "Value": "test-cluster"}])
    return w


def _custom_node(w, labels=None) -> tuple[str, object]:
    """A Custom AMI's node: the user's userData registers it with the unregistered taint only."""
    inst, nc = launch_one(w)
    name = w.join(inst, ready=True)["metadata"]["name"]
    w.server.store.patch("nodes", name, {"metadata": {"labels": dict(labels or {})},
                                         "spec": {"taints": [dict(UNREGISTERED)]}})
    return name, nc


def test_custom_ami_family_gets_the_taints_and_startup_taints_at_registration():
    w = _custom_world()
    try:
        name, nc = _custom_node(w)
        assert [r["nodeClaim"] for r in w.sweep()["registered"]] == [nc.name]
        assert {"dedicated", STARTUP["key"]} <= _keys(w, name) and UNREGISTERED["key"] not in _keys(w, name)
        assert not w.store.get("NodeClaim", nc.name).is_true("Initialized")   # its startup taint is there now
        w.server.store.patch("nodes", name, {"spec": {"taints": [
            t for t in w.server.store.get("nodes", name)["spec"]["taints"] if t["key"] != STARTUP["key"]]}})
        w.sweep()                                                            # the agent removed it
        assert w.store.get("NodeClaim", nc.name).is_true("Initialized")
        assert STARTUP["key"] not in _keys(w, name)                          # registered once: not put back
    finally:
        w.__exit__(None, None, None)


def test_custom_ami_family_with_the_do_not_sync_label_gets_no_taint():
    w = _custom_world()
    try:
        name, nc = _custom_node(w, {wk.NODE_DO_NOT_SYNC_TAINTS: "true"})
        w.sweep()
        assert w.store.get("NodeClaim", nc.name).is_true("Registered")
        assert _keys(w, name) == set()
    finally:
        w.__exit__(None, None, None)


def test_initialization_waits_for_every_requested_resource(world):
    inst, nc = launch_one(world)

    def ask(obj):   # a pod asked for hugepages (no "/" in the name) and an EBS volume (our volume count)
        obj.spec["resources"]["requests"].update({"hugepages-2Mi": "64Mi",
                                                  wk.volume_resource("ebs.csi.aws.com"): "1"})
        return obj

    world.store.update("NodeClaim", nc.name, ask)
    name = world.join(inst, ready=True)["metadata"]["name"]
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Registered")
    assert not world.store.get("NodeClaim", nc.name).is_true("Initialized")   # no hugepages-2Mi allocatable yet
    alloc = dict(world.server.store.get("nodes", name)["status"]["allocatable"], **{"hugepages-2Mi": "128Mi"})
    world.server.store.patch("nodes", name, {"status": {"allocatable": alloc}})
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")       # the volume count never blocks
