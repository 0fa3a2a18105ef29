"""EC2 capacity shortages (Scenario ``capacity`` steps, sim/capacity.py): the simulated CreateFleet answers as EC2 does
when overrides are out of capacity, the provisioner falls back past them, and consolidation under a spot shortage
does not replace an on-demand node by another on-demand node (the audit's loop, fixed in a798b22)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
from moto import mock_aws

from karpenter_lambda.adapters.aws.unavailable import UnavailableOfferings
from karpenter_lambda.sim import capacity, moto_ec2
from karpenter_lambda.sim.simulator import Simulation
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "scenarios" / "spot-shortage.yaml"
REGION = "us-east-1"


def _fleet(ec2, subnets, capacity_type="spot", overrides=(("c6a.large", "a"), ("c6a.large", "b"), ("m6a.large", "a"))):
    ovs = [{"InstanceType": t, "SubnetId": subnets[z], "Priority": float(i)} for i, (t, z) in enumerate(overrides)]
    return ec2.create_fleet(Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1,
                                                                         "DefaultTargetCapacityType": capacity_type},
                            LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "nodes",
                                                                                    "Version": "$Latest"},
                                                    "Overrides": ovs}])


def _launched(answer):
    return [(i["InstanceType"], i["Lifecycle"], i["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"])
            for i in answer["Instances"]]


def _errors(answer):
    return [(e["ErrorCode"], e["Lifecycle"], e["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"],
             e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"]) for e in answer.get("Errors") or []]


def test_create_fleet_answers_an_error_per_override_out_of_capacity_and_launches_the_next_one():
    with mock_aws():
        moto_ec2.enable(REGION)
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = {z: ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i * 32}.0/19", AvailabilityZone=REGION + z)
                   ["Subnet"]["SubnetId"] for i, z in enumerate("ab")}
        image = ec2.register_image(Name="node-image")["ImageId"]
        ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": image})
        a, b = subnets["a"], subnets["b"]

        # no rule: moto's own answer (the first override)
        assert _launched(_fleet(ec2, subnets)) == [("c6a.large", "spot", a)] and \
            "Errors" not in _fleet(ec2, subnets)

        # spot out in us-east-1a: the cheapest override fails, the next one (us-east-1b) launches
        capacity.add_rule(REGION, capacity.CapacityRule("spot", False, zones=frozenset({"us-east-1a"})))
        answer = _fleet(ec2, subnets)
        assert _errors(answer) == [("InsufficientInstanceCapacity", "spot", "c6a.large", a)]
        assert _launched(answer) == [("c6a.large", "spot", b)]
        assert _launched(_fleet(ec2, subnets, "on-demand")) == [("c6a.large", "on-demand", a)]   # on-demand untouched

        # no spot anywhere: an error per override, no instance (a fleet id all the same)
        capacity.add_rule(REGION, capacity.CapacityRule("spot", False))
        answer = _fleet(ec2, subnets)
        assert answer["FleetId"].startswith("fleet-") and answer["Instances"] == []
        assert _errors(answer) == [("InsufficientInstanceCapacity", "spot", "c6a.large", a),
                                   ("InsufficientInstanceCapacity", "spot", "c6a.large", b),
                                   ("InsufficientInstanceCapacity", "spot", "m6a.large", a)]
        assert answer["Errors"][0]["ErrorMessage"] == "There is no Spot capacity available that matches your request."

        # a narrower rule gives part of it back (the last matching rule decides)
        capacity.add_rule(REGION, capacity.CapacityRule("spot", True, instance_types=frozenset({"m6a.large"})))
        answer = _fleet(ec2, subnets)
        assert [e[2:] for e in _errors(answer)] == [("c6a.large", a), ("c6a.large", b)]
        assert _launched(answer) == [("m6a.large", "spot", a)]

        # on-demand narrowed to one type and zone: EC2's on-demand message names them
        capacity.add_rule(REGION, capacity.CapacityRule("on-demand", False, frozenset({"c6a.large"}),
                                                        frozenset({"us-east-1a"})))
        answer = _fleet(ec2, subnets, "on-demand")
        assert _errors(answer) == [("InsufficientInstanceCapacity", "on-demand", "c6a.large", a)]
        assert "sufficient c6a.large capacity in the Availability Zone you requested (us-east-1a)" in \
            answer["Errors"][0]["ErrorMessage"]
        assert _launched(answer) == [("c6a.large", "on-demand", b)]
        assert len(moto_ec2.all_instances(ec2)) == 6   # nothing launched for an override out of capacity


def test_the_provisioner_launches_past_the_offerings_out_of_capacity_and_marks_them_unavailable():
    manifests = scenario_manifests().replace('values: ["on-demand"]', 'values: ["spot", "on-demand"]')
    with World(manifests) as w:
        answers = []
        capacity.set_hook(w.region, answers.append)
        capacity.add_rule(w.region, capacity.CapacityRule("spot", False))
        capacity.add_rule(w.region, capacity.CapacityRule("spot", True, zones=frozenset({"us-east-1c"})))
        pods = w.add_pods([make_pod(f"p{i}") for i in range(3)])
        assert w.provision(w.sqs_event(pods)) == {"batchItemFailures": []}

        [nc] = w.store.list("NodeClaim")
        assert (nc.labels["karpenter.sh/capacity-type"], nc.labels["topology.kubernetes.io/zone"]) == ("spot", "us-east-1c")
        # one CreateFleet: the cheaper overrides in us-east-1a/b answered InsufficientInstanceCapacity, one launched
        [answer] = answers
        assert answer["nodeClaim"] == nc.name and answer["launched"] == (nc.labels["node.kubernetes.io/instance-type"],
                                                                         "us-east-1c")
        assert answer["errors"] and {z for _, z in answer["errors"]} <= {"us-east-1a", "us-east-1b"}
        cache = UnavailableOfferings(table_name=w.account.cache_table, region=w.region, cluster_name=w.cluster).all()
        assert {(t, z, "spot") for t, z in answer["errors"]} <= cache   # the launcher marked what EC2 refused


def _spot_opening_scenario(tmp_path) -> list[Path]:
    """The audit's input: an on-demand NodePool of c/m generation > 4 and 6 pods of 1 cpu (one c6a.2xlarge), the
    NodePool allowing spot from 3m; here spot capacity is gone from 2m (the audit forced it by monkeypatching)."""
    requirements = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}]

    def nodepool(capacity_types):
        reqs = [dict(r, values=capacity_types) if r["key"] == "karpenter.sh/capacity-type" else r for r in requirements]
        return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
                "spec": {"template": {"spec": {"requirements": reqs, "nodeClassRef": {
                    "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                         "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                                        "budgets": [{"nodes": "100%"}]}}}

    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                 "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                          "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                          "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "default"},
                  "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "a"}},
                           "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
                               {"name": "c", "image": "nginx",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}
    scenario = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                "spec": {"startTime": "2026-12-07T18:00:00Z", "steps": [
                    {"at": "2m", "capacity": {"capacityType": "spot", "available": False}},
                    {"at": "3m", "apply": nodepool(["on-demand", "spot"])}]}}
    files = []
    for name, doc in (("np.yaml", nodepool(["on-demand"])), ("nc.yaml", nodeclass), ("wl.yaml", deployment),
                      ("s.yaml", scenario)):
        (tmp_path / name).write_text(json.dumps(doc))
        files.append(tmp_path / name)
    return files


def test_consolidation_under_a_spot_shortage_does_not_replace_an_on_demand_node_by_on_demand(tmp_path):
    # 14 minutes: before the fix the node was replaced at +7m and +11m already (every 4 minutes)
    d = Simulation(_spot_opening_scenario(tmp_path), until=840, progress=lambda m: None).run().to_dict()
    events = d["events"]
    launched = [e for e in events if e["type"] == "NodeClaimLaunched"]
    first = launched[0]
    assert "on-demand" in first["message"] and "replaces" not in first

    # the spot shortage is seen: consolidation's spot replacements get InsufficientInstanceCapacity, launch nothing
    shortage = [e for e in events if e["type"] == "InsufficientCapacity"]
    assert shortage and all(e["capacityType"] == "spot" and e["launched"] is None for e in shortage)
    assert all(e["time"] > 180 for e in shortage)

    # before the fix: an identical on-demand c6a.2xlarge replaced the node every 4 minutes
    replacements = [e for e in launched if e.get("reason") == "Underutilized"]
    assert len(replacements) <= 1
    assert not [e for e in replacements if " on-demand " in e["message"]]
    capacity_of = {e["object"].split("/", 1)[1]: e["message"].split()[1] for e in launched}   # "TYPE CAPACITY in ZONE"
    underutilized = [e for e in events if e["type"] == "NodeClaimDisrupted" and e.get("reason") == "Underutilized"]
    assert not [e for e in underutilized if any(capacity_of.get(c) == "on-demand" for c in e.get("replacements") or [])]

    # the pods stay bound, on the node they started on
    assert d["pods"] == {"total": 6, "bound": 6}
    assert [n["name"] for n in d["nodeClaims"]] == [first["object"].split("/", 1)[1]]
    assert not [e for e in events if e["type"] == "PodEvicted"]


def test_the_spot_shortage_example_falls_back_to_on_demand_and_returns_to_spot():
    p = subprocess.run([sys.executable, "-m", "karpenter_lambda", "validate", str(EXAMPLE)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = Simulation([EXAMPLE], progress=lambda m: None).run().to_dict()
    events = d["events"]
    changed = [(e["time"], e["capacityType"], e["available"]) for e in events if e["type"] == "CapacityChanged"]
    assert changed == [(180.0, "spot", False), (720.0, "spot", True)]
    assert [e["object"] for e in events if e["type"] == "ScenarioStep"] == ["step/0", "step/1", "step/2"]
    # the scale-up at 4m: spot refused (an error per spot override, nothing launched), then on-demand
    [refused] = [e for e in events if e["type"] == "InsufficientCapacity"]
    assert 240 <= refused["time"] < 300 and refused["launched"] is None and refused["offerings"] > 1
    during = [e for e in events if e["type"] == "NodeClaimLaunched" and 180 < e["time"] < 720]
    assert during and all(" on-demand " in e["message"] for e in during)
    # spot capacity back: a spot NodeClaim again, every pod bound
    assert any(" spot " in e["message"] for e in events if e["type"] == "NodeClaimLaunched" and e["time"] >= 720)
    assert d["pods"] == {"total": 8, "bound": 8}
