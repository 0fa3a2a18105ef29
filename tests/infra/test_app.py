"""app.py end to end (errors a deployer sees), a second parameter set, and the local layer bundler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config import ConfigError

REPO = Path(__file__).resolve().parents[2]
BROKEN_NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: Bogus, values: [spot]}
"""


def _run_app(context: dict, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(cwd / "cdk.out")}
    return subprocess.run([sys.executable, str(REPO / "app.py")], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_app_without_cluster_name_exits_with_the_flag_to_pass(tmp_path):
    proc = _run_app({}, tmp_path)
    assert proc.returncode == 1
    assert "error: missing context parameter clusterName" in proc.stderr
    assert "-c clusterName=" in proc.stderr
    assert not (tmp_path / "cdk.out" / "manifest.json").exists()


def test_app_with_an_invalid_nodepool_fails_with_the_validation_lines(tmp_path):
    pools = tmp_path / "pools"
    pools.mkdir()
    (pools / "bad.yaml").write_text(BROKEN_NODEPOOL)
    proc = _run_app({"clusterName": "demo", "nodePools": "pools", "aws:cdk:bundling-stacks": []}, tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    expected = f"{pools / 'bad.yaml'}:0: NodePool/broken: spec.template.spec.requirements[0].operator: unsupported value 'Bogus'"
    assert expected in proc.stderr
    assert "context parameter nodePools: 1 problem(s)" in proc.stderr
    assert not (tmp_path / "cdk.out" / "manifest.json").exists()


def test_build_app_reports_every_invalid_manifest(tmp_path):
    from infra.app import build_app
    from infra.nodepools import NodePoolValidationError

    (tmp_path / "a.yaml").write_text(BROKEN_NODEPOOL)
    (tmp_path / "b.yaml").write_text("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: nc}\nspec: {}\n")
    with pytest.raises(NodePoolValidationError) as e:
        build_app({"clusterName": "demo", "nodePools": str(tmp_path), "aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"))
    files = {Path(i.file).name for i in e.value.issues}
    assert files == {"a.yaml", "b.yaml"}
    assert all(str(i) in str(e.value) for i in e.value.issues)
    assert any("EC2NodeClass/nc: spec." in str(i) for i in e.value.issues)


def test_build_app_rejects_bad_context(tmp_path):
    from infra.app import build_app

    with pytest.raises(ConfigError, match="logRetentionDays"):
        build_app({"clusterName": "demo", "logRetentionDays": "2"}, outdir=str(tmp_path))


@pytest.fixture(scope="module")
def variant(tmp_path_factory, synth_factory):
    """Every optional parameter set, no nodePools."""
    return synth_factory(
        {
            "clusterName": "other",
            "kubernetesVersion": "1.33",
            "lifecycleIntervalMinutes": "5",
            "logRetentionDays": "7",
            "logLevel": "debug",
            "podBatchSize": "10",
            "podBatchWindowSeconds": "0",
            "provisionerConcurrency": "3",
            "kubernetesAccess": "cluster-admin",
            "alarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops",
        },
        tmp_path_factory.mktemp("cdk.out.variant"),
    )


def test_variant_parameters_reach_the_template(variant):
    fns = {k: v["Properties"] for k, v in variant.of_type("AWS::Lambda::Function").items()}
    assert len(fns) == 6  # provisioner, lifecycle, drift, consolidation, interruption, offpeak; no custom resource provider
    for p in fns.values():
        env = p["Environment"]["Variables"]
        assert env["KARPENTER_LAMBDA_KUBERNETES_VERSION"] == "1.33"
        assert env["POWERTOOLS_LOG_LEVEL"] == "DEBUG"
        assert env["KARPENTER_LAMBDA_CLUSTER"] == "other"
    prov = next(p for k, p in fns.items() if k.startswith("Provisioner"))
    assert prov["ReservedConcurrentExecutions"] == 3
    [esm] = [v for k, v in variant.of_type("AWS::Lambda::EventSourceMapping").items() if k.startswith("Provisioner")]
    assert esm["Properties"]["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in esm["Properties"]
    assert esm["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 3}
    rules = {k: v["Properties"]["ScheduleExpression"] for k, v in variant.of_type("AWS::Events::Rule").items()
             if "ScheduleExpression" in v["Properties"]}
    assert [v for k, v in rules.items() if k.startswith("Lifecycle")] == ["rate(5 minutes)"]
    # the drift and consolidation sweeps keep the default disruptionIntervalMinutes (1), offpeak its 5
    assert sorted(v for k, v in rules.items() if not k.startswith(("Lifecycle", "Offpeak"))) == ["rate(1 minute)"] * 2
    assert [v for k, v in rules.items() if k.startswith("Offpeak")] == ["rate(5 minutes)"]
    # cluster-admin mode: the off-peak role gets the same access policy as the controller
    entries = variant.of_type("AWS::EKS::AccessEntry")
    assert entries["OffPeakAccessEntry"]["Properties"]["AccessPolicies"] == entries["ControllerAccessEntry"]["Properties"]["AccessPolicies"]
    assert {lg["Properties"]["RetentionInDays"] for lg in variant.of_type("AWS::Logs::LogGroup").values()} == {7}
    queue = next(v for k, v in variant.of_type("AWS::SQS::Queue").items() if "DeadLetter" not in k)
    assert queue["Properties"]["VisibilityTimeout"] == 6 * prov["Timeout"]
    assert variant.of_type("Custom::AWS") == {}


def test_variant_cluster_admin_access_and_alarm_actions(variant):
    entry = variant.of_type("AWS::EKS::AccessEntry")["ControllerAccessEntry"]["Properties"]
    assert "KubernetesGroups" not in entry
    [policy] = entry["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert json.dumps(policy["PolicyArn"]).endswith('":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"]]}')
    alarms = variant.of_type("AWS::CloudWatch::Alarm").values()
    assert alarms and all(a["Properties"]["AlarmActions"] == ["arn:aws:sns:us-east-1:123456789012:ops"] for a in alarms)
    [report] = [r for r in variant.report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert report["conclusion"] == "success" and report["violations"] == []


def test_local_bundler_builds_an_arm64_layer(tmp_path):
    from infra.layer import PACKAGE_DIR, LocalLayerBundler

    req = tmp_path / "requirements.txt"
    req.write_text("PyYAML>=6.0\n")
    out = tmp_path / "asset"
    assert LocalLayerBundler(requirements=req, extra_pip_args=("--no-deps",)).try_bundle(str(out)) is True
    site = out / "python"
    # the Lambda platform's wheel (compiled for aarch64 / CPython 3.14), not the host's
    compiled = [p.name for p in (site / "yaml").glob("_yaml*.so")]
    assert compiled and all("cpython-314-aarch64" in n for n in compiled), compiled
    # the package itself, without caches
    assert (site / "karpenter_lambda" / "api" / "manifests.py").read_text() == (PACKAGE_DIR / "api" / "manifests.py").read_text()
    assert not list(site.glob("karpenter_lambda/**/__pycache__"))
    assert not list(site.glob("*.egg-info"))


def test_bundler_failure_is_an_error_with_pips_output(tmp_path):
    from infra.layer import build_layer

    req = tmp_path / "requirements.txt"
    req.write_text("this-package-does-not-exist-karpenter-lambda==0.0.1\n")
    with pytest.raises(RuntimeError, match="building the core layer failed"):
        build_layer(tmp_path / "out", requirements=req, extra_pip_args=("--no-deps", "--no-index"))


def test_another_providers_node_class_in_the_folder_fails_synth(tmp_path):
    """`validate` only notes a KWOKNodeClass (Karpenter's kwok example); the deploy folder refuses it."""
    from infra.nodepools import NodePoolValidationError, load_node_pools

    (tmp_path / "kwok.yaml").write_text(
        "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\n"
    )
    with pytest.raises(NodePoolValidationError) as e:
        load_node_pools(tmp_path)
    assert "kwok.yaml:0: KWOKNodeClass/default: apiVersion: skipped: karpenter.kwok.sh/v1alpha1 KWOKNodeClass" in str(e.value)


def test_an_ec2nodeclass_with_another_role_is_a_synth_warning(tmp_path):
    """iam:PassRole covers only the stack's node role: a folder EC2NodeClass naming Karpenter's usual
    KarpenterNodeRole-<cluster> would deploy but never launch, so synth warns (a CDK annotation, fatal
    under `cdk deploy --strict`) naming the role to use; a matching role gives no warning."""
    from aws_cdk.assertions import Annotations, Match

    from infra.app import build_app
    from infra.nodepools import role_issues

    nodeclass = ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: default}}\nspec:\n"
                 "  role: {role}\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n"
                 "  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]\n"
                 "  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]\n")
    (tmp_path / "nc.yaml").write_text("---\n# comment\n---\n" + nodeclass.format(role="KarpenterNodeRole-demo"))
    issues = [str(i) for i in role_issues(tmp_path, "KarpenterLambdaNode-demo")]
    assert len(issues) == 1
    assert issues[0].startswith(f"{tmp_path / 'nc.yaml'}:1: EC2NodeClass/default: spec.role: 'KarpenterNodeRole-demo' is not this stack's node role")
    assert issues[0].endswith("set spec.role: KarpenterLambdaNode-demo")

    app = build_app({"clusterName": "demo", "nodePools": str(tmp_path), "aws:cdk:bundling-stacks": []}, outdir=str(tmp_path / "out"), nag=False)
    stack = app.node.find_child("KarpenterLambda-demo")
    assert stack.node_pools.role_warnings == issues
    Annotations.from_stack(stack).has_warning("*", Match.string_like_regexp("is not this stack's node role"))

    (tmp_path / "nc.yaml").write_text(nodeclass.format(role="KarpenterLambdaNode-demo"))
    assert role_issues(tmp_path, "KarpenterLambdaNode-demo") == []
