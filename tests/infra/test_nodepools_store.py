"""The nodePools writer's DynamoDB calls, replayed on moto, read back by the store (the contract with adapters/store)."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws

from karpenter_lambda.adapters.store.state import Store
from karpenter_lambda.api.manifests import load_files

CLUSTER = "demo-cluster"  # the clusterName of the session synth (tests/infra/conftest.py)


def _calls(synth, phase: str) -> list[dict]:
    out = []
    for res in synth.of_type("Custom::AWS").values():
        parts = res["Properties"][phase]["Fn::Join"][1]
        call = json.loads("".join(p if isinstance(p, str) else "state" for p in parts))  # the table Ref -> "state"
        out.append(call)
    return out


def _invoke(client, call: dict) -> None:
    assert call["service"] == "DynamoDB"
    method = {"updateItem": client.update_item, "deleteItem": client.delete_item}[call["action"]]
    method(**call["parameters"])


def test_deploy_writes_objects_the_store_reads(synth, nodepools_dir):
    expected = {(o.kind, o.name): o for o in load_files([nodepools_dir]).objects}
    with mock_aws():
        store = Store(CLUSTER, table_name="state", region="us-east-1")
        store.ensure_table()
        client = boto3.client("dynamodb", region_name="us-east-1")
        for call in _calls(synth, "Create"):
            _invoke(client, call)
        for (kind, name), obj in expected.items():
            got = store.get(kind, name)
            assert got is not None, (kind, name)
            assert got.spec == obj.spec
            assert got.metadata["resourceVersion"] == "1"
        assert [p.name for p in store.list("NodePool")] == ["default"]

        # a controller writes status; a redeploy (Update) changes the spec, bumps the version, keeps the status
        store.update_status("NodePool", "default", {"conditions": [{"type": "Ready", "status": "True"}]})
        for call in _calls(synth, "Update"):
            _invoke(client, call)
        pool = store.get("NodePool", "default")
        assert pool.metadata["resourceVersion"] == "3"
        assert pool.status["conditions"][0]["type"] == "Ready"
        # optimistic locking still works on the redeployed item
        store.update_status("NodePool", "default", {"resources": {"nodes": "0"}})
        assert store.get("NodePool", "default").metadata["resourceVersion"] == "4"

        # removing the manifest from the folder (resource deleted) removes the object
        for call in _calls(synth, "Delete"):
            _invoke(client, call)
        assert store.list("NodePool") == [] and store.list("EC2NodeClass") == []


NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: batch}}
spec:{replicas}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}]
"""


def _nodepool(tmp_path, replicas: int | None):
    from karpenter_lambda.api.manifests import load_text
    text = NODEPOOL.format(replicas=f"\n  replicas: {replicas}" if replicas is not None else "")
    (obj,) = load_text(text, "batch.yaml").objects
    return obj


def test_a_deploy_cannot_turn_a_nodepool_static_or_dynamic(tmp_path):
    """Karpenter's CRD refuses adding or removing spec.replicas on update; the GitOps writer's condition does too,
    against what the deploy wrote and what `karpenter-lambda apply` (the store) wrote."""
    from botocore.exceptions import ClientError
    from infra.nodepools import upsert_parameters

    dynamic, static, static5 = _nodepool(tmp_path, None), _nodepool(tmp_path, 3), _nodepool(tmp_path, 5)
    with mock_aws():
        store = Store(CLUSTER, table_name="state", region="us-east-1")
        store.ensure_table()
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.update_item(**upsert_parameters(CLUSTER, "state", dynamic))          # created dynamic
        client.update_item(**upsert_parameters(CLUSTER, "state", dynamic))          # redeployed as it is
        try:
            client.update_item(**upsert_parameters(CLUSTER, "state", static))
            raise AssertionError("a dynamic NodePool was turned static")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "ConditionalCheckFailedException"
        assert store.get("NodePool", "batch").spec.get("replicas") is None
        # deleted and created again static; then its replicas change (allowed), and removing them is refused
        client.delete_item(TableName="state", Key=upsert_parameters(CLUSTER, "state", dynamic)["Key"])
        client.update_item(**upsert_parameters(CLUSTER, "state", static))
        client.update_item(**upsert_parameters(CLUSTER, "state", static5))
        assert store.get("NodePool", "batch").spec["replicas"] == 5
        try:
            client.update_item(**upsert_parameters(CLUSTER, "state", dynamic))
            raise AssertionError("a static NodePool was turned dynamic")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "ConditionalCheckFailedException"
        # a NodePool stored by `apply` (the store's JSON, "replicas": 3 with a space) is held the same way
        store.delete("NodePool", "batch")
        store.put(static)
        client.update_item(**upsert_parameters(CLUSTER, "state", static5))
        try:
            client.update_item(**upsert_parameters(CLUSTER, "state", dynamic))
            raise AssertionError("a static NodePool stored by apply was turned dynamic")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "ConditionalCheckFailedException"
