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
