"""NodeOverlays stored in DynamoDB reach provisioning through the snapshot loader: the launched type follows the
overlaid price, the NodeClaim records it, and a conflicting overlay's status says so (moto + local Kubernetes API)."""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.conditions import get_condition
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.controllers.snapshot import SnapshotLoader
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

# the NodePool allows m5, c5 and m6i on-demand; a savings plan on m6i.2xlarge makes it the cheapest for a 1-CPU pod
OVERLAYS = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: m6i-savings-plan
spec:
  weight: 20
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m6i.2xlarge"]
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["on-demand"]
  price: "0.0042"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: a-same-weight
spec:
  weight: 20
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["m6i"]
  priceAdjustment: "+50%"
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: kwok
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
"""


def test_stored_overlays_steer_the_launch_and_report_conflicts(monkeypatch):
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    overlays = load_text(OVERLAYS, "overlays.yaml")
    assert overlays.ok
    with World(load_text(scenario_manifests(), "<world>").objects + overlays.objects) as world:
        resp = world.provision(world.sqs_event(world.add_pods([make_pod("web-0", cpu="1")])))
        assert resp == {"batchItemFailures": []}
        (inst,) = world.instances()
        assert inst["InstanceType"] == "m6i.2xlarge"
        (nc,) = world.store.list("NodeClaim")
        assert float(nc.annotations[L.PRICE_ANNOTATION]) == 0.0042
        applied = world.store.get("overlays", "m6i-savings-plan")
        conflict = world.store.get("NodeOverlay", "a-same-weight")
        assert get_condition(applied.status, L.CONDITION_VALIDATION_SUCCEEDED)["status"] == "True"
        cond = get_condition(conflict.status, L.CONDITION_VALIDATION_SUCCEEDED)
        assert (cond["status"], cond["reason"]) == ("False", "Conflict") and "m6i-savings-plan" in cond["message"]
        assert get_condition(conflict.status, L.CONDITION_READY)["status"] == "False"
        # a second round writes no status again (nothing changed): the resource versions stay
        versions = {o.name: o.metadata["resourceVersion"] for o in world.store.list("NodeOverlay")}
        world.provision(world.sqs_event(world.add_pods([make_pod("web-1", cpu="1", owner="other")])))
        assert {o.name: o.metadata["resourceVersion"] for o in world.store.list("NodeOverlay")} == versions
        # a NodePool whose nodeClassRef is not an EC2NodeClass gets no instance types (not the EC2NodeClass
        # "default" of the same name), and says why
        env = world.env
        snap = SnapshotLoader(env.store, env.kube, env.claims, AWSCloudProvider.from_environment(env)).load(world.clock.now())
        assert "kwok" not in snap.instance_types and "is not an EC2NodeClass" in snap.nodepool_problems["kwok"]
        assert {it.name for it in snap.instance_types["default"] if it.name == "m6i.2xlarge"} == {"m6i.2xlarge"}
