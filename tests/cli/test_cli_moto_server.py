"""The CLI against a real moto_server subprocess via --endpoint-url."""

import json
import socket

import yaml
from cli_manifests import NODECLAIM, pair


def test_apply_get_delete_through_moto_server(cli, manifests, moto_server):
    ep = ("--endpoint-url", moto_server, "--cluster", "srv")
    f = manifests("all.yaml", pair() + "---\n" + NODECLAIM)
    rc, out, err = cli(*ep, "apply", "--create-table", "-f", f)
    assert rc == 0, err
    assert out.splitlines()[-3:] == ["ec2nodeclass/default created", "nodepool/default created", "nodeclaim/default-x7k2p created"]

    # the data really is in moto_server: read it with plain boto3, bypassing our code
    import boto3
    ddb = boto3.client("dynamodb", endpoint_url=moto_server, region_name="us-east-1")
    item = ddb.get_item(TableName="karpenter-lambda-state", Key={"pk": {"S": "srv#NodePool"}, "sk": {"S": "default"}})["Item"]
    assert item["version"] == {"N": "1"} and json.loads(item["spec"]["S"])["weight"] == 10

    rc, out, _ = cli(*ep, "get", "nodepools", "-o", "json")
    assert rc == 0 and [i["metadata"]["name"] for i in json.loads(out)["items"]] == ["default"]
    rc, out, _ = cli(*ep, "get", "nodeclaim", "default-x7k2p", "-o", "yaml")
    assert rc == 0 and yaml.safe_load(out)["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    rc, out, _ = cli(*ep, "get", "ec2nodeclasses")
    assert rc == 0 and out.splitlines()[1].startswith("default")

    for kind, name in (("nc", "default-x7k2p"), ("np", "default"), ("ec2nc", "default")):
        rc, out, err = cli(*ep, "delete", kind, name)
        assert rc == 0, err
    rc, _, err = cli(*ep, "get", "np", "default")
    assert rc == 1 and "not found" in err
    assert cli(*ep, "delete", "np", "default")[0] == 1
    rc, out, err = cli(*ep, "get", "np", "-o", "json")
    assert rc == 0 and json.loads(out)["items"] == []


def test_endpoint_from_environment(cli, manifests, moto_server, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server)
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "env-endpoint-table")
    rc, out, err = cli("--cluster", "envc", "apply", "--create-table", "-f", manifests("p.yaml", pair()))
    assert rc == 0, err
    import boto3
    ddb = boto3.client("dynamodb", endpoint_url=moto_server, region_name="us-east-1")
    assert "env-endpoint-table" in ddb.list_tables()["TableNames"]
    assert ddb.get_item(TableName="env-endpoint-table", Key={"pk": {"S": "envc#NodePool"}, "sk": {"S": "default"}}).get("Item")


def test_unreachable_endpoint_is_2_with_a_hint(cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, out, err = cli("--endpoint-url", f"http://127.0.0.1:{port}", "get", "nodepools")
    assert rc == 2
    assert f"cannot reach DynamoDB at http://127.0.0.1:{port}: is moto_server running?" in err


def test_fresh_moto_server_needs_no_create_table_flag(cli, manifests, moto_server, monkeypatch):
    """A user pointing the CLI at an empty moto_server: apply/get/delete work without --create-table
    (the table is created on first use at a non-AWS endpoint, with a note on stderr; stdout stays clean)."""
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "first-use-table")
    ep = ("--endpoint-url", moto_server, "--cluster", "fresh")
    rc, out, err = cli(*ep, "get", "nodepools", "-o", "json")
    assert rc == 0, err
    assert json.loads(out) == {"apiVersion": "v1", "kind": "List", "items": []}
    assert f"table first-use-table created at {moto_server}" in err
    rc, out, err = cli(*ep, "apply", "-f", manifests("p.yaml", pair()))
    assert rc == 0, err
    assert out.splitlines() == ["ec2nodeclass/default created", "nodepool/default created"]
    assert "created at" not in err  # only once
    rc, out, _ = cli(*ep, "get", "np", "default", "-o", "json")
    assert rc == 0 and json.loads(out)["spec"]["weight"] == 10
    assert cli(*ep, "delete", "np", "default")[0] == 0


def test_aws_endpoints_never_create_the_table():
    from karpenter_lambda.cli.store_cmds import creates_table_on_first_use

    assert creates_table_on_first_use("http://127.0.0.1:5000")
    assert creates_table_on_first_use("http://localstack:4566")
    assert not creates_table_on_first_use(None)
    assert not creates_table_on_first_use("https://dynamodb.us-east-1.amazonaws.com")
    assert not creates_table_on_first_use("https://vpce-1a2b.dynamodb.us-east-1.vpce.amazonaws.com")
