"""The short fault-injection run (issue 21; the long one is bench/faults.py in `make bench`): a few seeds of the real
handlers against moto and the local Kubernetes API with crashes, EC2/DynamoDB/Kubernetes errors, SQS redelivery and
duplicates, lost EventBridge messages, hung calls past the Lambda timeout and two invocations at once; every
invariant holds through the run (checked after every round) and after the settle every loss counter is 0.
``faults_injected`` counts injected faults only: retries and scenario events are counted apart.
The second test shows the counters are not blind: losses planted in the settled cluster are counted."""

from __future__ import annotations

import pytest

from karpenter_lambda.sim.faults import EVENT_KINDS, FAULT_KINDS, LOSS_KEYS, RETRY_KINDS, FaultRun, run_seed


@pytest.mark.parametrize("seed", [1, 2])
def test_short_fault_run_loses_nothing(seed):
    r = run_seed(seed, rounds=5, settle_rounds=30, rate=0.9)
    assert r["faults_injected"] >= 5, r["faults"]
    assert r["detail"]["settled"], r["detail"]
    # honest counts: only faults in faults_injected; SQS redeliveries and scenario events apart
    assert set(r["faults"]) <= set(FAULT_KINDS) and r["faults_injected"] == sum(r["faults"].values()), r["faults"]
    assert set(r["retries"]) <= set(RETRY_KINDS) and set(r["scenario_events"]) <= set(EVENT_KINDS)
    assert not any(r["invariant_violations"].values()), (seed, r["violations"])
    for k in LOSS_KEYS:
        assert r[k] == 0, (seed, k, r["detail"], r["faults"])


def test_counters_see_planted_losses():
    planted = {}

    def plant(run: FaultRun) -> None:
        w = run.w
        claims = [nc for nc in w.store.list("NodeClaim") if nc.status.get("providerID")]
        assert claims, "the settled cluster has nodes"
        nc = claims[0]
        iid = nc.status["providerID"].rsplit("/", 1)[-1]
        inst = w.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        # a second instance for the same NodeClaim: a double launch, and a leak (no live NodeClaim names it)
        w.ec2.run_instances(ImageId=inst["ImageId"], InstanceType=inst["InstanceType"], MinCount=1, MaxCount=1,
                            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                {"Key": "karpenter.sh/nodepool", "Value": "default"},
                                {"Key": "karpenter.sh/nodeclaim", "Value": nc.name}]}])
        # a disrupted taint on a node nobody is deleting
        node = next(n for n in w.server.store.list("nodes") if n["spec"].get("providerID", "").endswith("/" + iid))
        w.server.store.patch("nodes", node["metadata"]["name"], {"spec": {"taints": (node["spec"].get("taints") or []) + [
            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})
        # the instance dies behind everyone's back: its pods are lost
        w.ec2.terminate_instances(InstanceIds=[iid])
        planted["lost"] = sum(1 for p in w.server.store.list("pods") if p["spec"].get("nodeName") == node["metadata"]["name"])
        # one more replica nobody provisions for: stuck
        name = sorted(run.deploys)[0]
        run.deploys[name] += 1
        run.wc.scale("Deployment", "default", name, run.deploys[name])
        run.wc.reconcile()

    r = FaultRun(3, rounds=2, settle_rounds=10, rate=0.0, settle_jump=0).run(before_measure=plant)
    assert r["faults_injected"] == 0
    assert r["double_launches"] == 1 and r["leaked_instances"] == 1, r["detail"]
    assert r["stranded_taints"] == 1, r["detail"]
    assert planted["lost"] > 0 and r["lost_pods"] == planted["lost"], (planted, r["detail"])
    assert r["stuck_pods"] >= 1, r["detail"]
