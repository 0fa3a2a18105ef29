"""Issue 29 item 3: the simulated world behaves as EC2 and a kubelet do.

* the kubelet registers capacity and allocatable from the instance type (and its userData), not from a NodeClaim:
  an instance that joins before any NodeClaim names it still offers its cpu and memory;
* DescribeInstances is eventually consistent: a launched instance is invisible for ``ec2_visibility_delay`` virtual
  seconds, then visible;
* CreateFleet / RunInstances honour ClientToken: the same token and parameters give back the same instance, other
  parameters IdempotentParameterMismatch.
"""

import pytest
from botocore.exceptions import ClientError

from karpenter_lambda.adapters.aws.userdata import ClusterInfo, render_user_data
from karpenter_lambda.sim import nodes as simnodes
from karpenter_lambda.sim.kubelet_flags import read_user_data
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

AGENT_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


def _provision(w, n=3, prefix="p", cpu="500m"):
    pods = w.add_pods([make_pod(f"{prefix}{i}", cpu=cpu) for i in range(n)])
    assert w.provision(w.sqs_event(pods)) == {"batchItemFailures": []}
    return pods


def test_an_instance_with_no_nodeclaim_registers_its_types_capacity_and_takes_pods():
    with World(scenario_manifests()) as w:
        _provision(w)
        [nc] = w.store.list("NodeClaim")
        predicted = (dict(nc.status["capacity"]), dict(nc.status["allocatable"]))
        [inst] = w.launched_instances()
        assert w.store.delete("NodeClaim", nc.name)        # joins before any NodeClaim names it (lost / not adopted)

        node = w.join(inst, ready=True)

        info = simnodes.instance_type_info(w.region, inst["InstanceType"])
        status = node["status"]
        assert status["capacity"]["cpu"] == str(info["VCpuInfo"]["DefaultVCpus"])
        # the catalog's prediction at launch and the kubelet's registration agree, resource by resource
        assert (status["capacity"], status["allocatable"]) == predicted
        labels = node["metadata"]["labels"]
        assert labels["karpenter.sh/nodepool"] == "default" and labels["team"] == "platform"   # userData --node-labels
        assert "karpenter.k8s.aws/instance-cpu" not in labels        # Karpenter's registration adds those, not the kubelet
        keys = {t["key"] for t in node["spec"].get("taints") or []}
        assert keys == {"dedicated", "karpenter.sh/unregistered"}    # startup taint removed by its agent (NodePool's)

        # the review's finding: pods stayed Pending on a node that registered no cpu or memory
        w.server.store.patch("nodes", node["metadata"]["name"], {"spec": {"taints": [
            t for t in node["spec"]["taints"] if t["key"] != "karpenter.sh/unregistered"]}}, patch_type="merge")
        w.add_pods([make_pod(f"late{i}", cpu="400m") for i in range(3)])
        w.schedule()
        bound = [p for p in w.server.store.list("pods") if p["metadata"]["name"].startswith("late")]
        assert [p["spec"].get("nodeName") for p in bound] == [node["metadata"]["name"]] * 3


@pytest.mark.parametrize("family", ["AL2023", "AL2", "Bottlerocket"])
def test_user_data_gives_the_kubelet_its_labels_taints_max_pods_and_reservations(family):
    cluster = ClusterInfo(name="c", endpoint="https://example.com", cidr="172.20.0.0/16")
    kubelet = {"kubeReserved": {"cpu": "200m", "memory": "1Gi"}, "evictionHard": {"memory.available": "5%"}}
    text = render_user_data(family, cluster, None, {"team": "a", "karpenter.sh/nodepool": "np"},
                            [{"key": "dedicated", "value": "apps", "effect": "NoSchedule"}], [AGENT_TAINT], kubelet, 17)
    flags = read_user_data(text)
    assert flags.source == family
    assert flags.labels == {"team": "a", "karpenter.sh/nodepool": "np", "karpenter.sh/do-not-sync-taints": "true"}
    assert {(t["key"], t.get("value", ""), t["effect"]) for t in flags.taints} == {
        ("dedicated", "apps", "NoSchedule"), (AGENT_TAINT["key"], "", "NoSchedule"),
        ("karpenter.sh/unregistered", "", "NoExecute")}
    assert flags.max_pods == 17
    assert flags.kube_reserved == {"cpu": "200m", "memory": "1Gi"}
    assert flags.eviction_hard == {"memory.available": "5%"}


def test_unreadable_user_data_gives_no_flags():
    assert read_user_data("#!/bin/bash\necho hello\n").source == ""
    assert read_user_data(None).max_pods is None


def test_a_launched_instance_is_invisible_to_describe_then_visible_and_its_kubelet_keeps_startup_taints():
    with World(scenario_manifests(), ec2_visibility_delay=5) as w:
        _provision(w)
        [inst] = w.launched_instances()
        iid = inst["InstanceId"]
        assert w.instances() == []
        with pytest.raises(ClientError) as e:
            w.ec2.describe_instances(InstanceIds=[iid])
        assert e.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
        w.clock.advance(4.0)
        assert w.instances() == []
        w.clock.advance(1.0)
        assert [i["InstanceId"] for i in w.instances()] == [iid]
        assert w.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["InstanceId"] == iid
        # its NodeClaim's startup taint stays until the node's agent removes it
        node = w.join(inst, ready=True, remove_startup_taints=False)
        assert {t["key"] for t in node["spec"]["taints"]} == {"dedicated", AGENT_TAINT["key"], "karpenter.sh/unregistered"}


def test_controllers_register_and_initialize_a_node_that_joined_before_its_instance_was_visible():
    with World(scenario_manifests(), ec2_visibility_delay=30) as w:
        _provision(w)
        [nc] = w.store.list("NodeClaim")
        [node] = w.join_all(ready=True)            # the kubelet does not wait for DescribeInstances
        report = w.sweep()                         # the lifecycle sweep sees a Node, no instance yet
        assert report["terminated"] == [] and report["deleted"] == []
        w.clock.advance(30.0)
        w.sweep()
        nc = w.store.get("NodeClaim", nc.name)
        assert nc.is_true("Registered") and nc.is_true("Initialized")
        assert nc.status["nodeName"] == node["metadata"]["name"]
        assert [i["State"]["Name"] for i in w.instances()] == ["running"]


def _fleet_params(w, token, instance_type="m5.large"):
    image = w.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    names = {t["LaunchTemplateName"] for t in w.ec2.describe_launch_templates()["LaunchTemplates"]}
    if "idem" not in names:
        w.ec2.create_launch_template(LaunchTemplateName="idem", LaunchTemplateData={"ImageId": image})
    return {"Type": "instant", "ClientToken": token,
            "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": "idem", "Version": "$Latest"},
                                       "Overrides": [{"InstanceType": instance_type, "SubnetId": w.account.subnet_ids[0]}]}],
            "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"}}


def test_client_token_returns_the_same_instance_and_refuses_other_parameters():
    with World(scenario_manifests()) as w:
        first = w.ec2.create_fleet(**_fleet_params(w, "tok-1"))
        again = w.ec2.create_fleet(**_fleet_params(w, "tok-1"))
        ids = first["Instances"][0]["InstanceIds"]
        assert again["FleetId"] == first["FleetId"] and again["Instances"][0]["InstanceIds"] == ids
        assert [i["InstanceId"] for i in w.instances()] == ids              # one instance, not two
        with pytest.raises(ClientError) as e:
            w.ec2.create_fleet(**_fleet_params(w, "tok-1", instance_type="c5.large"))
        assert e.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
        other = w.ec2.create_fleet(**_fleet_params(w, "tok-2"))
        assert other["Instances"][0]["InstanceIds"] != ids                  # a new token: a new launch
        assert len(w.instances()) == 2

        image = w.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        run = dict(ImageId=image, InstanceType="m5.large", MinCount=1, MaxCount=1, ClientToken="run-1")
        a = w.ec2.run_instances(**run)["Instances"][0]["InstanceId"]
        b = w.ec2.run_instances(**run)["Instances"][0]["InstanceId"]
        assert a == b and len(w.instances()) == 3
        with pytest.raises(ClientError) as e:
            w.ec2.run_instances(**{**run, "InstanceType": "m5.xlarge"})
        assert e.value.response["Error"]["Code"] == "IdempotentParameterMismatch"


def test_a_nodeclaim_deleted_before_its_instance_is_visible_terminates_it_by_id():
    """EC2's eventual consistency: a NodeClaim deleted while its instance is not described yet must not lose the
    instance (Karpenter terminates by id); before the fix the record went at once and the instance ran until the
    orphan GC."""
    from karpenter_lambda.api.times import format_time

    with World(scenario_manifests(), ec2_visibility_delay=30) as w:
        _provision(w)
        [nc] = w.store.list("NodeClaim")
        assert w.instances() == [] and len(w.launched_instances()) == 1   # running, not described yet

        def mark(obj):
            obj.metadata["deletionTimestamp"] = format_time(w.clock.now())
            return obj

        w.store.update("NodeClaim", nc.name, mark)
        w.sweep()
        assert w.launched_instances() == []                               # terminated by id at once
        assert w.store.get("NodeClaim", nc.name) is not None              # kept while it may still be unseen
        w.clock.advance(130.0)
        w.sweep()
        assert w.store.get("NodeClaim", nc.name) is None
