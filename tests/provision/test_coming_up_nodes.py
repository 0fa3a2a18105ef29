"""A node that registered but is not initialized yet (not-ready, startup taints) still takes pending pods.

Karpenter ignores the ephemeral taints (node.kubernetes.io/not-ready, karpenter.sh/unregistered, ...) and
the NodeClaim's startup taints when it simulates scheduling onto a managed node that is coming up: they go
away by themselves. Without that, every pod arriving while a node boots (or re-sent by the watcher's
resync) would launch a second node.
"""

from karpenter_lambda.controllers.provision import scheduling_taints
from karpenter_lambda.api.objects import NodeClaim
from karpenter_lambda.sim.world import make_pod

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
STARTUP = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
POOL = {"key": "dedicated", "value": "web", "effect": "NoSchedule"}


def _claim(initialized: bool) -> NodeClaim:
    status = {"conditions": [{"type": "Initialized", "status": "True" if initialized else "False"}]}
    return NodeClaim({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "nc"},
                      "spec": {"taints": [POOL], "startupTaints": [STARTUP]}, "status": status})


def test_uninitialized_managed_node_drops_ephemeral_and_startup_taints():
    node = {"spec": {"taints": [NOT_READY, UNREGISTERED, STARTUP, POOL]}}
    assert scheduling_taints(node, _claim(initialized=False)) == [POOL]


def test_readiness_controller_taints_are_ephemeral_too():
    # Karpenter's KnownEphemeralTaintKeyPrefixes: the Node Readiness Controller's readiness.k8s.io/<rule> taints
    readiness = {"key": "readiness.k8s.io/cni", "effect": "NoSchedule"}
    node = {"spec": {"taints": [NOT_READY, readiness, POOL]}}
    assert scheduling_taints(node, _claim(initialized=False)) == [POOL]
    assert scheduling_taints(node, _claim(initialized=True)) == [NOT_READY, readiness, POOL]


def test_initialized_or_unmanaged_node_keeps_its_taints():
    node = {"spec": {"taints": [NOT_READY, STARTUP, POOL]}}
    assert scheduling_taints(node, _claim(initialized=True)) == [NOT_READY, STARTUP, POOL]
    assert scheduling_taints(node, None) == [NOT_READY, STARTUP, POOL]


def test_pod_arriving_while_node_boots_goes_to_that_node(world):
    first = world.add_pods([make_pod("web-0", cpu="250m", memory="256Mi")])
    assert world.provision(world.sqs_event(first)) == {"batchItemFailures": []}
    (instance,) = world.instances()
    node = world.join(instance, ready=False)  # registered by the kubelet, still NotReady
    assert any(t["key"] == "node.kubernetes.io/not-ready" for t in node["spec"]["taints"])
    world.sweep()  # lifecycle: Registered, not Initialized
    (claim,) = world.store.list("NodeClaim")
    assert claim.is_true("Registered") and not claim.is_true("Initialized")

    second = world.add_pods([make_pod("web-1", cpu="250m", memory="256Mi")])
    assert world.provision(world.sqs_event(second)) == {"batchItemFailures": []}
    assert len(world.instances()) == 1, "a second node was launched for a pod that fits the node coming up"
    assert len(world.store.list("NodeClaim")) == 1
