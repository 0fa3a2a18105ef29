"""`apply`, `get`, `delete` in-process against moto (mock_aws)."""

import json

import pytest
import yaml
from cli_manifests import NODECLAIM, NODECLASS, UNSUPPORTED_KIND, nodepool, pair
from moto import mock_aws

from karpenter_lambda.adapters.store import Store


@pytest.fixture
def table():
    with mock_aws():
        Store("default").ensure_table()
        yield


def test_apply_get_delete_round_trip(cli, manifests, table):
    f = manifests("pair.yaml", nodepool() + "---\n" + NODECLASS)
    rc, out, err = cli("apply", "-f", f)
    assert rc == 0, err
    assert out.splitlines() == ["ec2nodeclass/default created", "nodepool/default created"]  # classes first

    rc, out, _ = cli("get", "nodepools")
    assert rc == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "NODECLASS", "WEIGHT", "LIMITS", "NODES", "READY", "AGE"]
    assert row.split()[:6] == ["default", "default", "10", "cpu=1000", "0", "Unknown"]

    rc, out, _ = cli("get", "np", "default", "-o", "json")
    doc = json.loads(out)
    assert doc["kind"] == "NodePool" and doc["spec"]["weight"] == 10
    assert doc["metadata"]["resourceVersion"] == "1" and doc["metadata"]["creationTimestamp"]

    rc, out, _ = cli("delete", "nodepool", "default")
    assert (rc, out) == (0, 'nodepool "default" deleted\n')
    rc, out, err = cli("get", "nodepool", "default")
    assert rc == 1 and err == 'error: NodePool "default" not found in cluster "default"\n'
    rc, out, err = cli("delete", "np", "default")
    assert rc == 1 and 'NodePool "default" not found in cluster "default"' in err


def test_delete_nodeclaim_marks_it_deleting_for_the_drain_as_kubectl_does(cli, manifests, table):
    """A NodeClaim with the termination finalizer is not removed outright (its instance would be garbage-collected
    with its pods still on it): it is marked deleting, and the lifecycle sweep drains and terminates it."""
    store = Store("default")
    doc = yaml.safe_load(NODECLAIM)
    from karpenter_lambda.api.objects import NodeClaim
    kept = dict(doc, metadata={**doc["metadata"], "finalizers": ["karpenter.sh/termination"]})
    store.create(NodeClaim(kept))
    store.create(NodeClaim(dict(doc, metadata={**doc["metadata"], "name": "bare"})))   # no finalizer
    rc, out, err = cli("delete", "nodeclaim", "default-x7k2p", "bare")
    assert rc == 0, err
    assert out.splitlines() == ['nodeclaim "default-x7k2p" deleted (draining: the lifecycle sweep drains the node '
                                'and terminates its instance)', 'nodeclaim "bare" deleted']
    nc = store.get("NodeClaim", "default-x7k2p")
    assert nc is not None and nc.metadata["deletionTimestamp"]
    assert "karpenter-lambda delete nodeclaim" in nc.metadata["annotations"]["karpenter-lambda.io/deletion-reason"]
    assert store.get("NodeClaim", "bare") is None


def test_apply_reports_unchanged_and_configured(cli, manifests, table):
    f = manifests("pair.yaml", pair())
    assert cli("apply", "-f", f)[0] == 0
    rc, out, _ = cli("apply", "-f", f)
    assert out.splitlines() == ["ec2nodeclass/default unchanged", "nodepool/default unchanged"]
    assert Store("default").get("NodePool", "default").metadata["resourceVersion"] == "1"
    g = manifests("pool.yaml", nodepool(weight=60))
    rc, out, _ = cli("apply", "-f", g)
    assert out == "nodepool/default configured\n"
    got = Store("default").get("NodePool", "default")
    assert got.spec["weight"] == 60 and got.metadata["resourceVersion"] == "2"


def test_apply_nothing_when_any_file_is_invalid(cli, manifests, table):
    good = manifests("good.yaml", pair())
    bad = manifests("bad.yaml", UNSUPPORTED_KIND)
    rc, out, err = cli("apply", "-f", good, "-f", bad)
    assert rc == 1
    assert out == ""
    assert f"{bad}:0: ConfigMap/cm: kind: unsupported kind" in err
    assert "nothing applied" in err
    assert Store("default").list("NodePool") == [] and Store("default").list("EC2NodeClass") == []


def test_apply_missing_file_is_2(cli, table):
    rc, _, err = cli("apply", "-f", "/nope.yaml")
    assert rc == 2 and "/nope.yaml: no such file or directory" in err


def test_apply_needs_f(cli):
    rc, _, err = cli("apply")
    assert rc == 2 and "-f/--filename" in err


def test_outputs_yaml_list_wide_and_aliases(cli, manifests, table):
    cli("apply", "-f", manifests("all.yaml", pair() + "---\n" + NODECLAIM))
    rc, out, _ = cli("get", "nodeclaims", "-o", "yaml")
    doc = yaml.safe_load(out)
    assert doc["kind"] == "List" and [i["metadata"]["name"] for i in doc["items"]] == ["default-x7k2p"]

    rc, out, _ = cli("get", "nc")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    assert row.split()[:6] == ["default-x7k2p", "m5.large", "spot", "us-east-1a", "-", "Unknown"]

    rc, out, _ = cli("get", "nodepools")
    assert out.splitlines()[1].split()[4] == "1"  # NODES counts the pool's NodeClaims

    rc, out, _ = cli("get", "ec2nc", "-o", "wide")
    header, row = out.splitlines()
    assert "SUBNETS" in header and "karpenter.sh/discovery=test" in row and "al2023@latest" in row
    rc, out, _ = cli("get", "EC2NodeClass", "default", "-o", "yaml")
    assert yaml.safe_load(out)["spec"]["role"] == "KarpenterNodeRole-test"


def test_status_survives_reapply(cli, manifests, table):
    f = manifests("pair.yaml", pair())
    cli("apply", "-f", f)
    Store("default").update_status("NodePool", "default", {"conditions": [{"type": "Ready", "status": "True"}]})
    cli("apply", "-f", manifests("pool.yaml", nodepool(weight=11)))
    rc, out, _ = cli("get", "np")
    assert out.splitlines()[1].split()[5] == "True"


def test_clusters_are_separate(cli, manifests, table):
    f = manifests("pair.yaml", pair())
    assert cli("--cluster", "blue", "apply", "-f", f)[0] == 0
    rc, out, err = cli("--cluster", "green", "get", "nodepools")
    assert (rc, out) == (0, "") and err == 'No nodepools found in cluster "green".\n'
    rc, out, _ = cli("--cluster", "blue", "get", "nodepools", "-o", "json")
    assert [i["metadata"]["name"] for i in json.loads(out)["items"]] == ["default"]


def test_unknown_kind_is_2(cli, table):
    rc, _, err = cli("get", "pods")
    assert rc == 2 and "unknown kind 'pods'" in err and "nodepools|ec2nodeclasses|nodeclaims" in err
    assert cli("delete", "widgets", "x")[0] == 2


def test_bad_output_format_is_2(cli):
    rc, _, err = cli("get", "np", "-o", "xml")
    assert rc == 2 and "invalid choice: 'xml'" in err


def test_missing_table_is_2_and_create_table_fixes_it(cli, manifests, monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "fresh-table")
    with mock_aws():
        rc, _, err = cli("get", "np")
        assert rc == 2 and "state table fresh-table does not exist" in err and "--create-table" in err
        rc, out, err = cli("apply", "--create-table", "-f", manifests("p.yaml", pair()))
        assert rc == 0, err
        assert out.splitlines()[0] == "table fresh-table created"
        assert cli("get", "np", "default")[0] == 0


def test_get_yaml_can_be_applied_again(cli, manifests, table):
    cli("apply", "-f", manifests("pair.yaml", pair()))
    Store("default").update_status("NodePool", "default", {"conditions": [{"type": "Ready", "status": "True"}]})
    rc, out, _ = cli("get", "np", "default", "-o", "yaml")
    doc = yaml.safe_load(out)
    doc["spec"]["weight"] = 33
    rc, out, err = cli("apply", "-f", manifests("round.yaml", yaml.safe_dump(doc)))
    assert rc == 0, err
    assert out == "nodepool/default configured\n"
    got = Store("default").get("NodePool", "default")
    assert got.spec["weight"] == 33 and got.metadata["generation"] == 2
    assert got.status["conditions"][0]["status"] == "True"


def test_apply_reports_validation_errors_with_field_paths(cli, manifests, table):
    bad = nodepool().replace("  weight: 10\n", "  weight: 10\n  disruption:\n    consolidationPolcy: WhenEmpty\n")
    f = manifests("typo.yaml", NODECLASS + "---\n" + bad)
    rc, out, err = cli("apply", "-f", f)
    assert rc == 1 and out == ""
    assert f"{f}:1: NodePool/default: spec.disruption.consolidationPolcy: " in err
    assert Store("default").list("EC2NodeClass") == []  # the valid class in the same file was not applied either


def test_bad_cluster_or_endpoint_is_a_usage_error_not_a_traceback(cli, manifests):
    """Exit 2 with a message naming the option (before any AWS call)."""
    f = manifests("p.yaml", pair())
    for argv, message in (
        (("--cluster", "a#b", "get", "np"), 'error: --cluster: cluster name "a#b" must not contain "#"'),
        (("--cluster", "", "delete", "np", "x"), "error: --cluster: cluster name must be a non-empty string"),
        (("--endpoint-url", "notaurl", "get", "np"), "error: --endpoint-url 'notaurl': expected an http(s) URL"),
        (("--endpoint-url", "ftp://h", "apply", "-f", f), "error: --endpoint-url 'ftp://h': expected an http(s) URL"),
    ):
        rc, out, err = cli(*argv)
        assert rc == 2, (argv, err)
        assert err.startswith(message), (argv, err)
        assert "Traceback" not in err


def test_apply_refuses_a_static_nodepool_turned_dynamic(cli, manifests, table):
    """The NodePool CRD's transition rule (api/updates.py): replicas cannot be added to or dropped from a stored
    NodePool; nothing of the files is applied."""
    assert cli("apply", "-f", manifests("pair.yaml", pair()))[0] == 0
    doc = yaml.safe_load(nodepool())
    doc["spec"].pop("weight", None)
    doc["spec"].pop("limits", None)
    doc["spec"]["replicas"] = 2   # valid on its own (a static NodePool), not as an update of the dynamic one
    static = manifests("static.yaml", yaml.safe_dump(doc))
    rc, out, err = cli("apply", "-f", static)
    assert rc == 1 and out == "", out
    assert "nodepool/default: spec: Cannot transition NodePool between static (replicas set) and dynamic" in err
    assert "replicas" not in Store("default").get("NodePool", "default").spec
