"""Test harness for the disruption sweeps: a World (moto + the local Kubernetes API + a virtual clock) with a
NodePool whose disruption settings the test chooses, nodes brought up through the real provisioner and lifecycle
handlers, and the real drift / consolidation handlers invoked by name."""

from __future__ import annotations

import manifests as shared
from karpenter_lambda.sim.world import World, make_pod

def manifests(*, policy="WhenEmpty", consolidate_after="60s", budgets='[{nodes: "100%"}]', expire_after="720h",
              tgp=None, alias="al2023@latest", capacity_types=("on-demand",), families=("m5", "c5", "m6i")) -> str:
    """The shared default NodePool + EC2NodeClass (tests/manifests.py) with the disruption settings under test."""
    return shared.pair(capacity_types=capacity_types, families=families, expire_after=expire_after,
                       termination_grace_period=tgp or None, policy=policy, consolidate_after=consolidate_after,
                       budgets=budgets, nodeclass_kw={"alias": alias, "tags": {"team": "platform"}})


class DisruptionWorld:
    def __init__(self, world: World):
        self.w = world

    def nodes_with_pods(self, counts: list[int], cpu: str = "500m", memory: str = "512Mi", **pod_kw) -> list[dict]:
        """One initialized node per entry of ``counts`` with that many bound pods; [{instance, nodeClaim, node, pods}]."""
        out = []
        for n, count in enumerate(counts):
            pods = self.w.add_pods([make_pod(f"app{n}-{i}", cpu=cpu, memory=memory, owner=f"app{n}", tolerate=False, **pod_kw)
                                    for i in range(max(count, 1))])
            before = {i["InstanceId"] for i in self.w.instances()}
            for x in out:   # each entry gets its own node: the earlier ones are cordoned meanwhile
                self.w.server.store.patch("nodes", x["nodeName"], {"spec": {"unschedulable": True}})
            self.w.provision(self.w.sqs_event(pods))
            (inst,) = [i for i in self.w.instances() if i["InstanceId"] not in before]
            node = self.w.join(inst, ready=True)
            self.w.sweep()
            self.w.schedule()
            nc = self.nodeclaim_of(inst["InstanceId"])
            assert nc.is_true("Initialized"), nc.status
            out.append({"instance": inst, "nodeClaim": nc, "node": node, "created": pods, "count": count,
                        "name": nc.name, "nodeName": node["metadata"]["name"], "iid": inst["InstanceId"]})
        for x in out:
            self.w.server.store.patch("nodes", x["nodeName"], {"spec": {"unschedulable": None}})
        for x in out:
            if x["count"] == 0:   # an empty node: its pod leaves once every node is up
                for p in x["created"]:
                    self.w.server.store.delete("pods", p["metadata"]["name"], "default")
            x["pods"] = self.pods_on(x["nodeName"])
            assert len(x["pods"]) == x["count"], (x["nodeName"], len(x["pods"]), x["count"])
        return out

    def put_pods(self, x: dict, count: int, cpu: str = "250m", app: str | None = None, **spec_extra) -> list[dict]:
        """Replace the pods of node ``x`` (an entry of :meth:`nodes_with_pods`) by ``count`` Running pods bound to it
        (ReplicaSet-owned, app label ``app``): a node sized for big pods that now runs small ones."""
        for p in self.pods_on(x["nodeName"]):
            self.w.server.store.delete("pods", p["metadata"]["name"], "default")
        out = []
        for i in range(count):
            pod = make_pod(f"{x['name']}-s{i}", cpu=cpu, memory="256Mi", owner=app or f"small-{x['name']}", tolerate=False,
                           nodeName=x["nodeName"], **spec_extra)
            pod["metadata"]["labels"]["app"] = app or f"small-{x['name']}"
            created = self.w.server.store.create("pods", pod, "default")
            self.w.server.store.patch("pods", created["metadata"]["name"], {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}},
                namespace="default", subresource="status")
            out.append(created)
        x["pods"] = self.pods_on(x["nodeName"])
        return out

    def pods_on(self, node_name: str) -> list[dict]:
        return [p for p in self.w.server.store.list("pods") if (p.get("spec") or {}).get("nodeName") == node_name]

    def nodeclaim_of(self, iid: str):
        for nc in self.w.store.list("NodeClaim"):
            if (nc.status.get("providerID") or "").endswith("/" + iid):
                return nc
        return None

    def nodeclaim_of_name(self, name: str) -> str | None:
        """The instance id of a NodeClaim."""
        nc = self.w.store.get("NodeClaim", name)
        return (nc.status.get("providerID") or "").rsplit("/", 1)[-1] if nc else None

    def nodeclaims(self) -> set[str]:
        return {nc.name for nc in self.w.store.list("NodeClaim")}

    def alive(self) -> set[str]:
        """NodeClaims not being deleted."""
        return {nc.name for nc in self.w.store.list("NodeClaim") if not nc.metadata.get("deletionTimestamp")}

    def state(self, iid: str) -> str:
        r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
        return r[0]["Instances"][0]["State"]["Name"]

    def running(self) -> set[str]:
        return {i["InstanceId"] for i in self.w.instances(states=("pending", "running"))}

    def tick(self, seconds: float = 60, *sweeps: str) -> dict:
        """Advance the clock, then run the given sweeps (default: consolidation and drift), then the lifecycle
        sweep (drain, terminate), join new instances and let the kube-scheduler bind; returns {name: response}."""
        self.w.clock.advance(seconds)
        out = {}
        for s in sweeps or ("consolidation", "drift"):
            out[s] = self.w.invoke(s)
        out["lifecycle"] = self.w.sweep()
        self.w.join_all(ready=True)
        out["lifecycle2"] = self.w.sweep()
        self.w.schedule()
        return out
