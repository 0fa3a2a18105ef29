"""AMIDrift and PlacementGroupDrift against what the EC2NodeClass resolves now (karpenter-provider-aws
``pkg/cloudprovider/drift.go``: ``isAMIDrifted``, ``isPlacementGroupDrifted``), on builders' snapshots with the
resolver's own ``ResolvedNodeClass`` (no moto)."""

from __future__ import annotations

import builders
from builders import claimed_node, nodepool
from karpenter_lambda.adapters.aws.amis import AMI, STANDARD, NVIDIA
from karpenter_lambda.adapters.aws.nodeclass_resolver import Condition, ResolvedNodeClass
from karpenter_lambda.adapters.aws.placement_groups import PlacementGroup
from karpenter_lambda.api import labels as L
from karpenter_lambda.disruption.drift import drift_reason


def _ami(image_id: str, arch: str = "amd64", variant=STANDARD, created: str = "2025-01-01T00:00:00Z") -> AMI:
    return AMI(image_id, image_id, arch, created,
               requirements=[{"key": L.ARCH, "operator": "In", "values": [arch]}, *[dict(r) for r in variant]])


def _resolved(amis=(), placement_group=None, conditions=()) -> ResolvedNodeClass:
    return ResolvedNodeClass(name="default", ami_family="AL2023", amis=list(amis), placement_group=placement_group,
                             conditions=list(conditions))


def _drift(resolved, *, image: str = "ami-std", labels: dict | None = None, instance_types=None):
    nc, node = claimed_node("x", status={"imageID": image}, labels=labels)
    snap = builders.snapshot((nc, node), nodepools=[nodepool()], instance_types=instance_types)
    snap.resolved["default"] = resolved
    return drift_reason(nc, snap)


# -- AMIDrift: the image is compared with the AMI chosen for the node's instance type -------------------------------
def test_a_node_on_an_image_of_another_requirement_set_drifts():
    """The node (m5.large: no GPU) runs the nvidia image, which is still in the resolved list: upstream maps the
    standard image to its type and drifts it; "image among the resolved AMIs" never did."""
    resolved = _resolved([_ami("ami-std"), _ami("ami-gpu", variant=NVIDIA)])
    assert _drift(resolved, image="ami-std") is None
    kind, message = _drift(resolved, image="ami-gpu")
    assert kind == "AMIDrift" and "ami-gpu" in message and "ami-std" in message and "m5.large" in message


def test_a_node_whose_type_no_resolved_ami_serves_drifts():
    """Only an arm64 image resolves now: the amd64 node's type maps to none (upstream: not in the map, AMIDrift)."""
    kind, _ = _drift(_resolved([_ami("ami-arm", arch="arm64")]), image="ami-std")
    assert kind == "AMIDrift"


def test_ami_choice_falls_back_to_the_nodeclaim_labels_without_a_catalog():
    """The NodePool's catalog was not loaded (e.g. the EC2NodeClass is not ready): the NodeClaim's labels (its
    type's, stamped at launch) choose the AMI."""
    resolved = _resolved([_ami("ami-std"), _ami("ami-gpu", variant=NVIDIA)])
    assert _drift(resolved, image="ami-gpu", instance_types={})[0] == "AMIDrift"
    assert _drift(resolved, image="ami-std", instance_types={}) is None


def test_no_ami_evidence_without_resolved_amis():
    assert _drift(_resolved([]), image="ami-anything") is None


# -- PlacementGroupDrift ---------------------------------------------------------------------------------------------
PG = PlacementGroup(id="pg-0123", name="hpc", strategy="cluster")
READY = Condition("PlacementGroupReady", True, "PlacementGroupReady")


def test_placement_group_label_differs_from_the_resolved_group_drifts():
    amis = [_ami("ami-std")]
    in_group = {L.PLACEMENT_GROUP_ID: "pg-0123"}
    assert _drift(_resolved(amis, PG, [READY]), labels=in_group) is None
    # the selector now names another group
    other = PlacementGroup(id="pg-0456", name="hpc2", strategy="cluster")
    kind, message = _drift(_resolved(amis, other, [READY]), labels=in_group)
    assert kind == "PlacementGroupDrift" and "pg-0456" in message
    # the selector was removed
    kind, message = _drift(_resolved(amis), labels=in_group)
    assert kind == "PlacementGroupDrift" and "pg-0123" in message
    # the selector was added: a node outside any group drifts
    assert _drift(_resolved(amis, PG, [READY]))[0] == "PlacementGroupDrift"
    # no selector, no label: nothing
    assert _drift(_resolved(amis)) is None


def test_placement_group_not_found_drifts_but_a_failed_describe_says_nothing():
    amis = [_ami("ami-std")]
    in_group = {L.PLACEMENT_GROUP_ID: "pg-0123"}
    gone = Condition("PlacementGroupReady", False, "PlacementGroupNotFound", "Placement group 'hpc' not found")
    assert _drift(_resolved(amis, None, [gone]), labels=in_group)[0] == "PlacementGroupDrift"
    failed = Condition("PlacementGroupReady", False, "PlacementGroupResolutionFailed", "throttled")
    assert _drift(_resolved(amis, None, [failed]), labels=in_group) is None
