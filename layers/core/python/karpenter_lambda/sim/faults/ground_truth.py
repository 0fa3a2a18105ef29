"""Ground truth at the end of a fault run: the loss counters (``measure``) and the quiet signature of the settle; and
the harness's own reads of moto's instances (:func:`launched`, :func:`instance_states`), which it makes several times
a round (kubelets, invariants, signature)."""

from __future__ import annotations

from collections import Counter
from datetime import timezone

from ...api.kube import instance_id_of
from ...api.labels import has_disrupted_taint
from .. import moto_ec2
from ..moto_ec2 import all_instances, unfiltered

LIVE_STATES = ("pending", "running")


def launched(w, states=LIVE_STATES) -> list:
    """moto's instances in ``states``, in DescribeInstances' order, read from moto's backend: the instances
    ``w.launched_instances(states)`` answers (every one, visible to DescribeInstances yet or not), without
    serializing and parsing every instance each time the harness looks (moto objects: ``.id``, ``.placement.zone``)."""
    return [i for r in moto_ec2.backend(w.region).describe_instances({"instance-state-name": list(states)})
            for i in r.instances]


def instance_states(w) -> list[dict]:
    """Every instance (every state), in DescribeInstances' order, with the fields of its DescribeInstances entry the
    invariants read -- InstanceId, State.Name, Tags and LaunchTime (epoch seconds, whole, as DescribeInstances
    answers it) -- read from moto's backend (the ground truth ``all_instances`` under ``unfiltered`` answers)."""
    return [{"InstanceId": i.id, "State": {"Name": i.state},
             "Tags": [{"Key": t["key"], "Value": t["value"]} for t in i.get_tags()],
             "LaunchTime": i.launch_time.replace(microsecond=0, tzinfo=timezone.utc).timestamp()}
            for r in moto_ec2.backend(w.region).describe_instances() for i in r.instances]


def described(w, instance_ids: list[str]) -> dict[str, dict]:
    """The DescribeInstances entries of ``instance_ids`` (visible yet or not), by id: what a kubelet joins with."""
    if not instance_ids:
        return {}
    with unfiltered():
        return {i["InstanceId"]: i for i in all_instances(w.ec2, InstanceIds=list(instance_ids))}


def _iid(provider_id: str | None) -> str:
    return instance_id_of(provider_id) or ""


def signature(w):
    """What the settle compares between rounds: pods and their nodes, instances, NodeClaims, disrupted taints."""
    pods = tuple(sorted((p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "") for p in w.server.store.list("pods")))
    insts = tuple(sorted(i.id for i in launched(w)))
    claims = tuple(sorted((nc.name, bool(nc.metadata.get("deletionTimestamp"))) for nc in w.store.list("NodeClaim")))
    taints = tuple(sorted(n["metadata"]["name"] for n in w.server.store.list("nodes")
                          if has_disrupted_taint(n)))
    return pods, insts, claims, taints


def measure(run) -> dict:
    """The loss counters (LOSS_KEYS) and their detail, from ground truth."""
    w = run.w
    with unfiltered():   # ground truth: every instance (every page), visible to DescribeInstances yet or not
        every = all_instances(w.ec2)
    tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []} for i in every}
    ours = [i for i in every if "karpenter.sh/nodepool" in tags[i["InstanceId"]]]
    per_claim = Counter(tags[i["InstanceId"]].get("karpenter.sh/nodeclaim", "") for i in ours)
    double = {k: v for k, v in per_claim.items() if k and v > 1}
    claims = w.store.list("NodeClaim")
    live_iids = {_iid(nc.status.get("providerID")) for nc in claims if not nc.metadata.get("deletionTimestamp")}
    running = {i["InstanceId"]: i for i in ours if i["State"]["Name"] in ("pending", "running")}
    leaked = sorted(iid for iid in running if iid not in live_iids)

    nodes = {n["metadata"]["name"]: n for n in w.server.store.list("nodes")}
    pods = [p for p in w.server.store.list("pods") if not p["metadata"].get("deletionTimestamp")]
    lost, stuck = {}, []
    for name in run.deploys:
        obj = w.server.store.get("deployments", name, "default") or {}
        replicas = int((obj.get("spec") or {}).get("replicas") or 0)
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == name]
        ok = pend = 0
        for p in mine:
            node = (p.get("spec") or {}).get("nodeName")
            if not node:
                pend += 1
                continue
            n = nodes.get(node)
            if n is not None and _iid((n.get("spec") or {}).get("providerID")) in running:
                ok += 1
        if replicas - ok - pend > 0:
            lost[name] = replicas - ok - pend
        stuck += [p["metadata"]["name"] for p in mine if not (p.get("spec") or {}).get("nodeName")]
    by_iid = {_iid(nc.status.get("providerID")): nc for nc in claims}
    stranded = []
    for n in nodes.values():
        if not has_disrupted_taint(n):
            continue
        nc = by_iid.get(_iid((n.get("spec") or {}).get("providerID")))
        if nc is None or not nc.metadata.get("deletionTimestamp"):
            stranded.append(n["metadata"]["name"])
    out = {"seed": run.seed, "leaked_instances": len(leaked), "lost_pods": sum(lost.values()), "stuck_pods": len(stuck),
           "stranded_taints": len(stranded), "budget_overruns": run.budget_overruns,
           "double_launches": sum(v - 1 for v in double.values())}
    out["detail"] = {"leaked": leaked, "lost": lost, "stuck": stuck[:20], "stranded": stranded, "double": double,
                     "overruns": run.overrun_detail[:10], "errors": dict(run.errors.most_common(10)),
                     "settled": run.settled, "settle_rounds": getattr(run, "settle_count", 0),
                     "instances": len(running), "nodeclaims": len(claims),
                     "virtual_minutes": round(w.clock.elapsed / 60, 1)}
    return out
