"""The EC2NodeClass resolved against moto, then the drift check on it: selector terms matching several images of one
architecture resolve to the newest alone (karpenter-provider-aws ``pkg/providers/amifamily/ami.go`` ``amis``), so a
node launched from an older one drifts (``pkg/cloudprovider/drift.go`` ``isAMIDrifted``), and launch picks the
image drift compares with."""

from __future__ import annotations

import builders
from builders import claimed_node, nodepool
from karpenter_lambda.adapters.aws.ssm_seed import add_image
from karpenter_lambda.api import labels as L
from karpenter_lambda.disruption.drift import drift_reason

from .conftest import REGION, nodeclass, resolver


def _drift_on(resolved, image: str, instance_type: str = "m5.large"):
    nc, node = claimed_node("x", instance_type=instance_type, status={"imageID": image})
    snap = builders.snapshot((nc, node), nodepools=[nodepool(arch=("amd64", "arm64"))])
    snap.resolved["default"] = resolved
    return drift_reason(nc, snap)


def test_tags_matching_two_releases_drift_the_node_on_the_older(env):
    v1 = add_image(REGION, name="my-ami-v1", arch="x86_64", creation_date="2025-01-01T00:00:00Z", tags={"team": "a"})
    v2 = add_image(REGION, name="my-ami-v2", arch="x86_64", creation_date="2025-06-01T00:00:00Z", tags={"team": "a"})
    resolved = resolver(env).resolve(nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"tags": {"team": "a"}}]))
    assert [a["id"] for a in resolved.status_patch()["amis"]] == [v2]
    assert resolved.ami_for(builders.instance_type("m5.large")).id == v2   # what launch picks
    kind, message = _drift_on(resolved, v1)
    assert kind == "AMIDrift" and v1 in message and v2 in message
    assert _drift_on(resolved, v2) is None


def test_two_id_terms_of_one_arch_drift_the_node_on_the_older(env):
    v1 = add_image(REGION, name="my-ami-v1", arch="x86_64", creation_date="2025-01-01T00:00:00Z")
    v2 = add_image(REGION, name="my-ami-v2", arch="x86_64", creation_date="2025-06-01T00:00:00Z")
    arm = add_image(REGION, name="my-ami-arm", arch="arm64", creation_date="2025-02-01T00:00:00Z")
    resolved = resolver(env).resolve(nodeclass(amiFamily="AL2023",
                                               amiSelectorTerms=[{"id": v1}, {"id": v2}, {"id": arm}]))
    assert [a.id for a in resolved.amis] == [v2, arm]
    assert _drift_on(resolved, v1)[0] == "AMIDrift"
    assert _drift_on(resolved, arm, instance_type="m6g.large") is None
    assert _drift_on(resolved, v2, instance_type="m6g.large")[0] == "AMIDrift"   # an amd64 image on an arm64 node


def test_a_deprecated_newer_release_does_not_drift_the_node_on_the_current_one(env):
    cur = add_image(REGION, name="my-ami-v1", arch="x86_64", creation_date="2025-01-01T00:00:00Z", tags={"team": "a"})
    add_image(REGION, name="my-ami-v2", arch="x86_64", creation_date="2025-06-01T00:00:00Z",
              deprecation_time="2025-07-01T00:00:00.000Z", tags={"team": "a"})
    resolved = resolver(env, clock=lambda: 1_760_000_000).resolve(      # 2025-10: v2 deprecated
        nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"tags": {"team": "a"}}]))
    assert [a.id for a in resolved.amis] == [cur]
    assert _drift_on(resolved, cur) is None


def test_alias_release_keeps_one_image_per_variant(env):
    resolved = resolver(env).resolve(nodeclass())
    image = resolved.ami_for(builders.instance_type("m5.large")).id
    assert _drift_on(resolved, image) is None
    gpu = resolved.ami_for({L.ARCH: "amd64", L.INSTANCE_GPU_COUNT: "1"}).id
    assert gpu != image and _drift_on(resolved, gpu)[0] == "AMIDrift"   # the nvidia image on a non-GPU type
    assert len(resolved.amis) == 5 and len({tuple(map(str, a.requirements)) for a in resolved.amis}) == 5
