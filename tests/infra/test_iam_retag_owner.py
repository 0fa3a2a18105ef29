"""Issue 29 item 6, fix 4: the controller may re-tag (CreateTags on an existing instance) only the instances this
deployment launched -- carrying its owner tag ``karpenter-lambda.io/cluster=<cluster>`` as the termination statement
requires -- never an upstream Karpenter's (owned + nodepool, no owner tag), a managed node group's or another
deployment's; tag-on-create stays conditioned on ``ec2:CreateAction``."""

from __future__ import annotations

from test_iam_scoping import (  # noqa: F401  (tests/infra is on sys.path; ``statements`` is its module fixture)
    CLUSTER, OWNED, _listify, allowed, request, resource, statements)

from karpenter_lambda.api.labels import NODEPOOL, OWNER_TAG


def test_existing_instances_are_retagged_only_with_this_deployments_owner_tag(statements):
    ours = {OWNED: "owned", NODEPOOL: "default", OWNER_TAG: CLUSTER, "karpenter.sh/nodeclaim": "default-abc"}
    upstream_karpenter = {OWNED: "owned", NODEPOOL: "default", "karpenter.sh/nodeclaim": "default-xyz"}
    managed_node_group = {OWNED: "owned", "eks:nodegroup-name": "system"}
    other_deployment = {**ours, OWNER_TAG: "other-cluster"}
    for keys in (["karpenter.sh/nodeclaim"], ["Name"], ["karpenter.sh/nodeclaim", "Name"]):
        assert allowed(statements, "ec2:CreateTags", "instance", resource(ours) | {"aws:TagKeys": keys}), keys
        for tags in (upstream_karpenter, managed_node_group, other_deployment, {}):
            assert not allowed(statements, "ec2:CreateTags", "instance", resource(tags) | {"aws:TagKeys": keys}), tags
    # the owner tag itself (or any other key) cannot be added later, so no instance can be made "ours" by tagging
    assert not allowed(statements, "ec2:CreateTags", "instance",
                       resource(upstream_karpenter) | {"aws:TagKeys": [OWNER_TAG]})


def test_every_instance_tagging_statement_is_scoped_by_owner_or_create_action(statements):
    tagging = [st for st in statements if "ec2:CreateTags" in _listify(st["Action"])
               and any("instance/" in str(r) for r in _listify(st["Resource"]))]
    assert {st["Sid"] for st in tagging} == {"AllowScopedResourceCreationTagging", "AllowScopedResourceTagging"}
    for st in tagging:
        eq = (st.get("Condition") or {}).get("StringEquals") or {}
        if "ec2:CreateAction" in eq:   # tag-on-create: the request's tags carry the owner tag
            assert set(_listify(eq["ec2:CreateAction"])) == {"RunInstances", "CreateFleet"}
            assert eq.get(f"aws:RequestTag/{OWNER_TAG}") == CLUSTER, st["Sid"]
        else:                          # an existing instance: it must carry the owner tag
            assert eq.get(f"aws:ResourceTag/{OWNER_TAG}") == CLUSTER, st["Sid"]
    # tag-on-create without a launch (no ec2:CreateAction) is not enough to tag an instance
    ours = {OWNED: "owned", NODEPOOL: "default", OWNER_TAG: CLUSTER}
    assert not allowed(statements, "ec2:CreateTags", "instance", request(ours))
