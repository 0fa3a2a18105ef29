"""The faults a Scenario injects: AWS's interruption events (through the interruption queue to the real handler)
and EC2 reclaiming a spot instance; how long the displaced pods waited for a node."""

from __future__ import annotations

import json

import boto3

from ..api.kube import instance_id_of, pod_key
from . import nodes as simnodes
from .feeds import sqs_record
from .interruption_events import events_for

SPOT_WARNING_SECONDS = 120.0   # EC2 reclaims a spot instance two minutes after the interruption warning
# the capacity type an interruption kind is sent for (EC2 warns spot instances of a reclaim, reserved ones of a
# reservation's end); the other kinds reach any instance
CAPACITY_OF_KIND = {"SpotInterruption": "spot", "CapacityReservationInterruption": "reserved"}


class InterruptionsMixin:
    """The :class:`~.simulator.Simulation`'s interruptions."""

    def _interrupt(self, a: dict) -> None:
        """AWS's events for the N oldest NodeClaims of the NodePool, through the interruption queue to the real
        handler; a spot instance is reclaimed by EC2 two minutes after its warning, drained or not."""
        if self.interruption is None:
            raise KeyError("functions/registry.json has no function reading the interruption queue")
        # EC2 sends a spot warning only to spot instances, a reservation's only to reserved ones
        wanted = CAPACITY_OF_KIND.get(a["kind"])
        claims = [nc for nc in self.store.list("NodeClaim")
                  if nc.labels.get("karpenter.sh/nodepool") == a["nodePool"] and nc.status.get("providerID")
                  and (wanted is None or nc.labels.get("karpenter.sh/capacity-type") == wanted)]
        # the N oldest, those not being deleted first (a node already draining may still get the notice)
        claims.sort(key=lambda nc: (bool(nc.metadata.get("deletionTimestamp")),
                                    nc.metadata.get("creationTimestamp") or "", nc.name))
        chosen = claims[: a.get("count", 1)]
        if not chosen:   # nothing of that NodePool runs now: the step has nothing to hit (the run goes on)
            self.emit("InterruptionSkipped", f"nodepool/{a['nodePool']}",
                      f"{a['kind']}: NodePool {a['nodePool']} has no running "
                      f"{wanted + ' ' if wanted else ''}NodeClaim to interrupt", kind=a["kind"])
            return
        iids = {instance_id_of(nc.status["providerID"]): nc for nc in chosen}
        if a["kind"] == "StateChange":
            self._change_state(list(iids), a.get("state") or "")
        sqs = boto3.client("sqs", region_name=self.region)
        url = self.account.interruption_queue_url
        for nc in chosen:
            self.emit("InterruptionReceived", f"nodeclaim/{nc.name}", f"{a['kind']} for {instance_id_of(nc.status['providerID'])}",
                      kind=a["kind"])
            node = nc.status.get("nodeName") or ""
            for p in self.server.store.list("pods"):
                if (p.get("spec") or {}).get("nodeName") == node and node:
                    self._watched[pod_key(p)] = node
        for ev in events_for(a["kind"], list(iids), self.clock.isoformat(), a.get("state")):
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(ev))
        msgs = []
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300,
                                      AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        response = self._call(self.interruption.handler, {"Records": [sqs_record(m, url, self.region) for m in msgs]},
                              "interruption")
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        for m in msgs:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            else:
                self.emit("RecordFailed", f"message/{m['MessageId']}", "interruption record failed: redelivered by SQS")
        if a["kind"] == "SpotInterruption":
            for iid in iids:
                self._schedule(self.clock.elapsed + SPOT_WARNING_SECONDS, "reclaim", {"instance": iid})

    def _change_state(self, iids: list[str], state: str) -> None:
        """What the notification reports has happened (EC2 sends it as the state changes): the instances stop or
        terminate, and their kubelets with them (the Nodes turn NotReady)."""
        ec2 = boto3.client("ec2", region_name=self.region)
        if state in ("stopping", "stopped"):
            ec2.stop_instances(InstanceIds=iids)
        elif state in ("shutting-down", "terminated"):
            ec2.terminate_instances(InstanceIds=iids)
        else:
            return   # pending / running: nothing changes
        for n in self.server.store.list("nodes"):
            if (n.get("spec") or {}).get("providerID", "").rsplit("/", 1)[-1] in iids:
                simnodes.set_node_ready(self.server, n["metadata"]["name"], False)

    def _reclaim(self, iid: str) -> None:
        """EC2 takes the spot instance back: terminated, its kubelet gone (the Node turns NotReady)."""
        ec2 = boto3.client("ec2", region_name=self.region)
        r = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
        state = r[0]["Instances"][0]["State"]["Name"] if r else "terminated"
        if state not in ("shutting-down", "terminated"):
            ec2.terminate_instances(InstanceIds=[iid])
        self.emit("SpotInstanceReclaimed", f"instance/{iid}",
                  f"EC2 reclaimed the spot instance {SPOT_WARNING_SECONDS:.0f}s after its warning (was {state})")
        for n in self.server.store.list("nodes"):
            if (n.get("spec") or {}).get("providerID", "").endswith("/" + iid):
                simnodes.set_node_ready(self.server, n["metadata"]["name"], False)

    def _track_displaced(self) -> None:
        """Pods of interrupted nodes: when they lost their node, and (PodsDisplaced) how long until a node again."""
        if not self._watched:
            return
        bound = {pod_key(p): (p.get("spec") or {}).get("nodeName")
                 for p in self.server.store.list("pods")}
        for key, old in list(self._watched.items()):
            node = bound.get(key)
            if node and node != old:
                since = self._displaced.pop(key, None)
                del self._watched[key]
                if since is not None and self.clock.elapsed > since:
                    secs = round(self.clock.elapsed - since, 3)
                    self.emit("PodsDisplaced", f"pod/{key}", f"no node for {secs:.0f}s after the interruption (now on {node})",
                              seconds=secs)
            elif node != old and key not in self._displaced:
                self._displaced[key] = self.clock.elapsed
