"""`karpenter-lambda watcher manifest`: the watcher's manifests with the deployment's values, for `kubectl apply -f -`."""

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.api import roles

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
IMAGE = f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/cdk-hnb659fds-container-assets-{ACCOUNT}-eu-west-1:" + "a" * 64
QUEUE = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/KarpenterLambda-prod-PodQueueABC-x1"
OUTPUTS = {  # `cdk deploy --outputs-file` (keys as infra/stack.py names them)
    "ClusterName": "prod", "Region": "eu-west-1", "PodQueueUrl": QUEUE, "WatcherImageUri": IMAGE,
    "WatcherNamespace": "karpenter-lambda", "WatcherServiceAccount": "karpenter-lambda-watcher",
    "WatcherRoleArn": f"arn:aws:iam::{ACCOUNT}:role/KarpenterLambda-prod-WatcherRole",
}


def _docs(text: str) -> dict:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:  # what kubectl needs of every object
        assert d["apiVersion"] and d["kind"] and d["metadata"]["name"], d
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _container(docs: dict) -> dict:
    return docs[("Deployment", "karpenter-lambda-watcher")]["spec"]["template"]["spec"]["containers"][0]


def _env(docs: dict) -> dict:
    return {e["name"]: e.get("value") for e in _container(docs)["env"]}


@pytest.fixture
def outputs_file(tmp_path):
    f = tmp_path / "outputs.json"
    f.write_text(json.dumps({"KarpenterLambda-prod": OUTPUTS}))
    return f


def test_stack_outputs_fill_image_queue_region_and_cluster(cli, outputs_file):
    rc, out, err = cli("watcher", "manifest", "--stack-outputs", str(outputs_file))
    assert rc == 0, err
    docs = _docs(out)
    assert set(docs) == {("Namespace", "karpenter-lambda"), ("ServiceAccount", "karpenter-lambda-watcher"),
                         ("ClusterRole", "karpenter-lambda-watcher"), ("ClusterRoleBinding", "karpenter-lambda-watcher"),
                         ("Deployment", "karpenter-lambda-watcher")}
    assert _container(docs)["image"] == IMAGE
    env = _env(docs)
    assert (env["CLUSTER_NAME"], env["POD_QUEUE_URL"], env["AWS_REGION"]) == ("prod", QUEUE, "eu-west-1")
    assert env["RESYNC_SECONDS"] == "60" and "EVENT_QUEUE_URL" not in env   # the template's other settings stay
    for placeholder in ("ACCOUNT_ID", "REGION.amazonaws", "value: CLUSTER_NAME", "value: REGION"):
        assert placeholder not in out
    # the security settings of the template survive the round trip
    assert _container(docs)["securityContext"]["readOnlyRootFilesystem"] is True


def test_identity_matches_the_pod_identity_association_and_rbac(cli, outputs_file):
    """The stack's Pod Identity association binds roles.WATCHER_NAMESPACE/WATCHER_SERVICE_ACCOUNT (infra/stack.py uses
    the same constants, tests/infra/test_watcher_image.py checks the synthesized association): the Deployment runs
    as that account, the binding grants it, and no name collides with infra/rbac's controller objects."""
    rc, out, _ = cli("watcher", "manifest", "--stack-outputs", str(outputs_file))
    docs = _docs(out)
    ns, sa = roles.WATCHER_NAMESPACE, roles.WATCHER_SERVICE_ACCOUNT
    assert docs[("ServiceAccount", sa)]["metadata"]["namespace"] == ns
    dep = docs[("Deployment", "karpenter-lambda-watcher")]
    assert (dep["metadata"]["namespace"], dep["spec"]["template"]["spec"]["serviceAccountName"]) == (ns, sa)
    binding = docs[("ClusterRoleBinding", "karpenter-lambda-watcher")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    assert binding["roleRef"]["name"] == "karpenter-lambda-watcher" and ("ClusterRole", "karpenter-lambda-watcher") in docs
    controller = [d for d in yaml.safe_load_all((REPO / "infra/rbac/controller-rbac.yaml").read_text()) if d]
    assert not {(d["kind"], d["metadata"]["name"]) for d in controller} & set(docs)
    # no IRSA annotation: Pod Identity needs none
    assert not docs[("ServiceAccount", sa)]["metadata"].get("annotations")


def test_flags_win_over_outputs_and_event_queue_is_optional(cli, outputs_file):
    other = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/other"
    rc, out, err = cli("watcher", "manifest", "--stack-outputs", str(outputs_file), "--image", "registry.example.com/w:2",
                       "--pod-queue-url", other, "--event-queue-url", other + "-events")
    assert rc == 0, err
    docs = _docs(out)
    assert _container(docs)["image"] == "registry.example.com/w:2"
    env = _env(docs)
    assert (env["POD_QUEUE_URL"], env["EVENT_QUEUE_URL"], env["CLUSTER_NAME"]) == (other, other + "-events", "prod")


def test_flags_alone_region_from_the_queue_url(cli, tmp_path):
    queue = f"https://sqs.ap-southeast-2.amazonaws.com/{ACCOUNT}/pods"
    out_file = tmp_path / "watcher.yaml"
    rc, out, err = cli("watcher", "manifest", "--image", "r.example.com/w:1", "--pod-queue-url", queue,
                       "--cluster", "syd", "-o", str(out_file))
    assert rc == 0, err
    assert out == ""
    env = _env(_docs(out_file.read_text()))
    assert (env["AWS_REGION"], env["CLUSTER_NAME"]) == ("ap-southeast-2", "syd")


def test_global_cluster_option_is_used(cli):
    queue = f"https://sqs.us-east-2.amazonaws.com/{ACCOUNT}/pods"
    rc, out, err = cli("--cluster", "from-global", "watcher", "manifest", "--image", "r.example.com/w:1",
                       "--pod-queue-url", queue)
    assert rc == 0, err
    assert _env(_docs(out))["CLUSTER_NAME"] == "from-global"


@pytest.mark.parametrize("shape", ["describe-stacks", "outputs-list"])
def test_describe_stacks_json_is_read(cli, tmp_path, shape):
    items = [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]
    data = {"Stacks": [{"StackName": "KarpenterLambda-prod", "Outputs": items}]} if shape == "describe-stacks" else items
    f = tmp_path / "o.json"
    f.write_text(json.dumps(data))
    rc, out, err = cli("watcher", "manifest", "--stack-outputs", str(f))
    assert rc == 0, err
    assert _env(_docs(out))["POD_QUEUE_URL"] == QUEUE


def test_several_stacks_need_cluster(cli, tmp_path):
    f = tmp_path / "o.json"
    staging = {**OUTPUTS, "ClusterName": "staging", "PodQueueUrl": QUEUE.replace("prod", "staging")}
    f.write_text(json.dumps({"KarpenterLambda-prod": OUTPUTS, "KarpenterLambda-staging": staging, "Other": {"X": "1"}}))
    rc, _, err = cli("watcher", "manifest", "--stack-outputs", str(f))
    assert rc == 2
    assert "2 stacks (KarpenterLambda-prod, KarpenterLambda-staging); pass --cluster NAME" in err
    rc, out, err = cli("watcher", "manifest", "--stack-outputs", str(f), "--cluster", "staging")
    assert rc == 0, err
    assert _env(_docs(out))["CLUSTER_NAME"] == "staging"


@pytest.mark.parametrize("args, message", [
    ([], "missing --image (output WatcherImageUri), --pod-queue-url (output PodQueueUrl), --cluster (output ClusterName)"),
    (["--image", "ACCOUNT_ID.dkr.ecr.REGION.amazonaws.com/karpenter-lambda-watcher:latest", "--pod-queue-url", QUEUE,
      "--cluster", "c"], "--image: 'ACCOUNT_ID.dkr.ecr.REGION.amazonaws.com/karpenter-lambda-watcher:latest' is not"),
    (["--image", "r/w:1", "--pod-queue-url", "https://example.com/q", "--cluster", "c", "--region", "eu-west-1"],
     "--pod-queue-url: 'https://example.com/q' is not an SQS queue URL"),
    (["--image", "r/w:1", "--pod-queue-url", QUEUE, "--cluster", "c", "--region", "us-east-1"],
     "--pod-queue-url: the queue is in eu-west-1, but the region is us-east-1"),
    (["--image", "r/w:1", "--pod-queue-url", QUEUE, "--cluster", "bad name"], "--cluster: 'bad name' is not an EKS cluster name"),
    (["--stack-outputs", "/nonexistent/outputs.json"], "--stack-outputs: cannot read /nonexistent/outputs.json"),
])
def test_bad_or_missing_values_are_usage_errors(cli, args, message, monkeypatch, tmp_path):
    monkeypatch.delenv("KARPENTER_LAMBDA_CLUSTER", raising=False)
    monkeypatch.chdir(tmp_path)   # no cdk.json with a clusterName
    rc, out, err = cli("watcher", "manifest", *args)
    assert rc == 2 and out == ""
    assert message in err, err


def test_a_service_account_other_than_the_stacks_is_refused(cli, tmp_path):
    """Outputs naming another service account (or edited manifests) would leave the watcher without AWS credentials."""
    f = tmp_path / "o.json"
    f.write_text(json.dumps({"KarpenterLambda-prod": {**OUTPUTS, "WatcherServiceAccount": "someone-else"}}))
    rc, _, err = cli("watcher", "manifest", "--stack-outputs", str(f))
    assert rc == 2
    assert "runs as karpenter-lambda/karpenter-lambda-watcher" in err and "binds karpenter-lambda/someone-else" in err

    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for src in (REPO / "watcher" / "manifests").glob("*.yaml"):
        (manifests / src.name).write_text(src.read_text().replace("serviceAccountName: karpenter-lambda-watcher",
                                                                  "serviceAccountName: default"))
    f.write_text(json.dumps({"KarpenterLambda-prod": OUTPUTS}))
    rc, _, err = cli("watcher", "manifest", "--stack-outputs", str(f), "--manifests", str(manifests))
    assert rc == 2 and "runs as karpenter-lambda/default" in err


def test_cluster_from_cdk_json_context(cli, tmp_path, monkeypatch):
    """With no --cluster anywhere, the cluster `cdk deploy` would use (cdk.json context clusterName)."""
    from karpenter_lambda.cli.watcher import known_cluster

    monkeypatch.delenv("KARPENTER_LAMBDA_CLUSTER", raising=False)
    monkeypatch.chdir(tmp_path)
    queue = f"https://sqs.us-east-2.amazonaws.com/{ACCOUNT}/pods"
    args = ["watcher", "manifest", "--image", "r.example.com/w:1", "--pod-queue-url", queue]
    rc, _, err = cli(*args)
    assert rc == 2 and "missing --cluster (output ClusterName)" in err
    (tmp_path / "cdk.json").write_text(json.dumps({"app": "python3 app.py", "context": {"clusterName": "from-cdk-json"}}))
    rc, out, err = cli(*args)
    assert rc == 0, err
    assert _env(_docs(out))["CLUSTER_NAME"] == "from-cdk-json"

    class Args:
        cluster = "default"
    assert known_cluster(Args()) == "from-cdk-json"
    Args.cluster = "explicit"
    assert known_cluster(Args()) == "explicit"
    (tmp_path / "cdk.json").write_text("{not json")
    Args.cluster = "default"
    assert known_cluster(Args()) is None
