"""Harness for the termination drain: a World (moto + the local Kubernetes API + a virtual clock), one node brought
up through the real provisioner and lifecycle handlers, pods bound to it directly in the API server, and
``finalize`` called on a *fresh* Terminator each time (a new object = a new Lambda invocation)."""

from __future__ import annotations

import pytest

import manifests as shared
from karpenter_lambda.api.labels import TERMINATION_FINALIZER
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.controllers.termination import Terminator
from karpenter_lambda.sim import nodes as simnodes
from karpenter_lambda.sim.world import World, make_pod

def manifests(tgp: str | None = None) -> str:
    """The shared NodePool + EC2NodeClass (tests/manifests.py): on-demand m5/c5, never expiring or consolidated."""
    return shared.pair(capacity_types=("on-demand",), families=("m5", "c5"), expire_after="Never",
                       termination_grace_period=tgp or None, policy="WhenEmpty", consolidate_after="Never")


def held_nodes(w: World) -> list[str]:
    """Nodes holding the ``karpenter.sh/termination`` finalizer that no NodeClaim names: nothing would ever finish
    them (a deleted one would be stuck).  Every path that removes a NodeClaim removes its Node's finalizer first."""
    named = {nc.status.get("providerID") for nc in w.store.list("NodeClaim")}
    return sorted(n["metadata"]["name"] for n in w.server.store.list("nodes")
                  if TERMINATION_FINALIZER in (n["metadata"].get("finalizers") or ())
                  and (n.get("spec") or {}).get("providerID") not in named)


class CountingCloud:
    """The real cloud provider (moto), counting TerminateInstances per instance id.  ``lag`` stands in for EC2's
    eventual consistency: that many DescribeInstances after a TerminateInstances still report the instance running
    (moto moves it to terminated at once)."""

    def __init__(self, cloud):
        self.cloud = cloud
        self.terminated: list[str] = []
        self.lag = 0
        self._stale = 0

    def terminate(self, ids):
        self.terminated.extend(ids)
        self.cloud.terminate(ids)
        self._stale = self.lag

    def describe(self, ids):
        out = self.cloud.describe(ids)
        if self._stale > 0:
            self._stale -= 1
            out = {k: {**v, "State": {"Code": 16, "Name": "running"}} for k, v in out.items()}
        return out

    def __getattr__(self, name):
        return getattr(self.cloud, name)


class TerminationWorld:
    def __init__(self, w: World):
        self.w = w
        self.server = w.server
        self.cloud = CountingCloud(AWSCloudProvider.from_environment(w.env))
        self.decisions: list[tuple[str, str, dict]] = []

    # -- set-up -------------------------------------------------------------------------------------
    def node_with_pods(self, count: int = 1) -> dict:
        """One initialized node running ``count`` ReplicaSet pods ``app-<i>`` (label app=app)."""
        pods = self.w.add_pods([make_pod(f"app-{i}", owner="app", tolerate=False) for i in range(count)])
        self.w.provision(self.w.sqs_event(pods))
        (inst,) = self.w.instances()
        node = self.w.join(inst, ready=True)
        self.w.sweep()
        self.w.schedule()
        nc = next(nc for nc in self.w.store.list("NodeClaim") if nc.status.get("providerID", "").endswith(inst["InstanceId"]))
        assert nc.is_true("Initialized"), nc.status
        out = {"name": nc.name, "node": node["metadata"]["name"], "iid": inst["InstanceId"]}
        assert len(self.pods_on(out["node"])) == count
        return out

    def pod(self, name: str, node: str, *, owner: str = "ReplicaSet", critical: bool = False, annotations=None,
            tolerations=None, phase: str = "Running", finalizers=None, grace: int | None = None, labels=None) -> dict:
        """A pod bound to ``node``, Running and Ready (a kubelet's view)."""
        meta = {"name": name, "namespace": "default", "labels": labels or {"app": name}, "annotations": annotations or {},
                "ownerReferences": [{"apiVersion": "v1" if owner == "Node" else "apps/v1", "kind": owner,
                                     "name": f"{name}-owner", "uid": f"u-{name}", "controller": True}]}
        if finalizers:
            meta["finalizers"] = list(finalizers)
        spec = {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}
        if critical:
            spec["priorityClassName"] = "system-node-critical"
        if tolerations:
            spec["tolerations"] = tolerations
        if grace is not None:
            spec["terminationGracePeriodSeconds"] = grace
        self.server.store.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, "default")
        return self.server.store.patch("pods", name, {"status": {"phase": phase, "startTime": self.w.clock.isoformat(),
                                                                 "conditions": [{"type": "Ready", "status": "True"}]}},
                                       namespace="default", subresource="status")

    def pdb(self, name: str, app: str, max_unavailable: int = 0) -> None:
        self.server.store.create("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}}}, "default")

    def release(self, pod: str) -> None:
        """The kubelet finishes a terminating pod (its finalizer goes, so does the pod)."""
        self.server.store.patch("pods", pod, {"metadata": {"finalizers": []}}, namespace="default")

    # -- the Terminator ------------------------------------------------------------------------------
    def terminator(self) -> Terminator:
        return Terminator(self.w.store, self.w.env.kube, self.cloud, self.w.env.claims, None,
                          lambda decision, message, **f: self.decisions.append((decision, message, f)))

    def not_ready(self, x: dict) -> None:
        """The kubelet stopped posting status: the Node's Ready condition turns False (the node lifecycle controller)."""
        simnodes.set_node_ready(self.server, x["node"], False)

    def request(self, x: dict, reason: str = "test") -> None:
        self.terminator().request(self.w.store.get("NodeClaim", x["name"]), reason)

    def finalize(self, x: dict, errors: list | None = None) -> str:
        """One invocation: a fresh Terminator with the NodeClaim, Node and instance as read now."""
        nc = self.w.store.get("NodeClaim", x["name"])
        assert nc is not None, "NodeClaim already deleted"
        node = self.server.store.get("nodes", x["node"])
        inst = self.cloud.describe([x["iid"]]).get(x["iid"])
        return self.terminator().finalize(nc, node, inst, errors)

    # -- observations --------------------------------------------------------------------------------
    def pods_on(self, node: str) -> list[dict]:
        return [p for p in self.server.store.list("pods") if (p.get("spec") or {}).get("nodeName") == node]

    def names_on(self, node: str) -> set[str]:
        return {p["metadata"]["name"] for p in self.pods_on(node)}

    def terminating_on(self, node: str) -> set[str]:
        return {p["metadata"]["name"] for p in self.pods_on(node) if p["metadata"].get("deletionTimestamp")}

    def evictions(self, ok_only: bool = True) -> list[str]:
        """Names of the pods the server accepted an eviction for, in order."""
        return [path.split("/pods/")[1].split("/")[0] for _m, path, code in self.server.requests("POST", r"/eviction$")
                if not ok_only or code < 300]

    def pod_deletes(self) -> list[str]:
        return [path.split("/pods/")[1].split("?")[0] for _m, path, code in self.server.requests("DELETE", r"/pods/[^/]+$")
                if code < 300]

    def status(self, x: dict) -> dict:
        nc = self.w.store.get("NodeClaim", x["name"])
        return (nc.status.get("termination") or {}) if nc else {}

    def state(self, iid: str) -> str:
        r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
        return r[0]["Instances"][0]["State"]["Name"]

    def running(self) -> set[str]:
        return {i["InstanceId"] for i in self.w.instances(states=("pending", "running"))}


@pytest.fixture
def make_world():
    """make_world(tgp=None) -> TerminationWorld (closed at the end of the test)."""
    worlds = []

    def make(tgp: str | None = None) -> TerminationWorld:
        w = World(manifests(tgp))
        w.__enter__()
        worlds.append(w)
        return TerminationWorld(w)

    yield make
    held = {id(w): held_nodes(w) for w in worlds}
    for w in reversed(worlds):
        w.__exit__(None, None, None)
    assert not any(held.values()), f"nodes left holding {TERMINATION_FINALIZER} without a NodeClaim: {held}"
