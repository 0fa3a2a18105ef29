"""`validate` warns about an EC2NodeClass role the cluster's stack will not pass to nodes, when the cluster is known
(--cluster, $KARPENTER_LAMBDA_CLUSTER or cdk.json's context); the same check as the synth warning (api/roles.py)."""

import json

import pytest

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: {role}
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"""
MESSAGE = "'KarpenterNodeRole-demo' is not this stack's node role"


@pytest.fixture
def upstream_role(tmp_path, monkeypatch):
    monkeypatch.delenv("KARPENTER_LAMBDA_CLUSTER", raising=False)
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "nc.yaml"
    f.write_text(NODECLASS.format(role="KarpenterNodeRole-demo"))
    return f


def test_known_cluster_warns_and_stays_valid(cli, upstream_role):
    rc, out, err = cli("--cluster", "demo", "validate", str(upstream_role))
    assert rc == 0, err
    assert f"{upstream_role}:0: EC2NodeClass/default: warning: {MESSAGE}" in err
    assert "set spec.role: KarpenterLambdaNode-demo (line 5)" in err

    rc, out, err = cli("--cluster", "demo", "validate", "--json", str(upstream_role))
    doc = json.loads(out)
    assert rc == 0 and doc["valid"] is True
    (w,) = [w for w in doc["warnings"] if w["path"] == "spec.role"]
    assert (w["kind"], w["name"], w["line"]) == ("EC2NodeClass", "default", 5)


def test_unknown_cluster_no_role_check(cli, upstream_role):
    rc, out, err = cli("validate", str(upstream_role))
    assert rc == 0, err
    assert MESSAGE not in err


def test_cluster_from_cdk_json_or_env(cli, upstream_role, tmp_path, monkeypatch):
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {"clusterName": "demo"}}))
    rc, _, err = cli("validate", str(upstream_role))
    assert rc == 0 and MESSAGE in err
    # another cluster's stack passes KarpenterLambdaNode-prod: the class names the demo one's
    (tmp_path / "cdk.json").unlink()
    upstream_role.write_text(NODECLASS.format(role="KarpenterLambdaNode-demo"))
    monkeypatch.setenv("KARPENTER_LAMBDA_CLUSTER", "prod")
    rc, _, err = cli("validate", str(upstream_role))
    assert rc == 0 and "'KarpenterLambdaNode-demo' is not this stack's node role" in err
    rc, _, err = cli("--cluster", "demo", "validate", str(upstream_role))
    assert rc == 0 and "node role" not in err
