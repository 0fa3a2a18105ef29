"""The one embedded environment (sim/environment.py) that ``simulate`` and the test World share, and the local API
server's eviction counting PodDisruptionBudgets through the one rule (disruption/pdb.py)."""

import io
import os
import urllib.request

import boto3
import pytest

from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.controllers import runtime
from karpenter_lambda.disruption.pdb import blocking_pdb
from karpenter_lambda.sim.clock import VirtualClock
from karpenter_lambda.sim.environment import SimEnvironment, capture_logs, load_module, repo_root
from karpenter_lambda.sim.feeds import sqs_record
from karpenter_lambda.sim.kubeapi import ObjectStore, StoreError
from karpenter_lambda.sim.world import scenario_manifests

START = 1_767_225_600.0   # 2026-01-01T00:00:00Z


def _nodeclasses():
    return [o for o in load_text(scenario_manifests(), "<t>").objects if o.kind == "EC2NodeClass"]


def test_environment_sets_up_and_undoes_everything(monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_KUBE_ENDPOINT", "https://elsewhere.example")
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", "https://elsewhere.example")
    before = dict(os.environ)
    clock = VirtualClock(START)
    lines = []
    with SimEnvironment(clock, _nodeclasses(), cluster="env-test", region="us-east-1", k8s_version="1.31",
                        uid_seed="seed", isolate=True, progress=lines.append) as env:
        # the shell's endpoints are gone; the account's settings are in
        assert "AWS_ENDPOINT_URL_EC2" not in os.environ
        assert os.environ.get("KARPENTER_LAMBDA_KUBE_ENDPOINT") != "https://elsewhere.example"
        assert urllib.request.urlopen(env.url + "/healthz").read() == b"ok"
        assert lines == [f"local Kubernetes API at {env.url}; seeding moto"]
        assert runtime.now() == START
        # moto's launch times are on the virtual clock
        ec2 = boto3.client("ec2", region_name="us-east-1")
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        inst = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large")["Instances"][0]
        assert inst["LaunchTime"].timestamp() == START
        sqs = boto3.client("sqs", region_name="us-east-1")
        sqs.send_message(QueueUrl=env.account.queue_url, MessageBody="{}")
        m = sqs.receive_message(QueueUrl=env.account.queue_url, AttributeNames=["All"])["Messages"][0]
        rec = sqs_record(m, env.account.queue_url, "us-east-1")
        assert rec["eventSourceARN"] == "arn:aws:sqs:us-east-1:123456789012:env-test-pods" and rec["body"] == "{}"
        server = env.server
    assert dict(os.environ) == before
    assert runtime.now() != START
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url + "/healthz", timeout=2)


def test_environment_undoes_a_failed_set_up():
    before = dict(os.environ)
    env = SimEnvironment(VirtualClock(START), [None], cluster="t", region="us-east-1", k8s_version="1.31")
    with pytest.raises(AttributeError):   # seeding the account fails on the bad EC2NodeClass, the API server is up
        env.__enter__()
    assert dict(os.environ) == before
    assert env.server._httpd is None   # stopped


def test_handler_logs_go_to_the_stream():
    mod = load_module(repo_root() / "functions" / "provisioner" / "handler.py", "env_test_provisioner")
    out = io.StringIO()
    capture_logs(mod, out)
    mod.logger.info("hello from the test")
    assert "hello from the test" in out.getvalue()


def _pod(store, name, labels, ready=True, phase="Running"):
    store.create("pods", {"metadata": {"name": name, "namespace": "default", "labels": labels}})
    conds = [{"type": "Ready", "status": "True" if ready else "False"}] if ready is not None else []
    return store.patch("pods", name, {"status": {"phase": phase, "conditions": conds}}, "default",
                       subresource="status")


@pytest.mark.parametrize("case", ["status", "running-without-ready", "min-available"])
def test_eviction_follows_the_one_pdb_rule(case):
    store = ObjectStore(clock=lambda: START)
    pdb = {"metadata": {"name": "web", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    if case == "status":
        # the budget's status says no: the API server honours it whatever the spec would allow
        _pod(store, "a", {"app": "web"})
        _pod(store, "b", {"app": "web"})
        pdb["status"] = {"disruptionsAllowed": 0}
    elif case == "running-without-ready":
        # healthy means Ready: a Running pod without Ready is the application's only pod and it is not healthy
        # (currentHealthy 0 < desiredHealthy 1), so the API server still refuses its eviction (429)
        _pod(store, "a", {"app": "web"}, ready=None)
    else:
        _pod(store, "a", {"app": "web"})
    store.create("poddisruptionbudgets", pdb)
    pods = store.list("pods")
    # every case is refused, by the rule and by the API server alike
    assert blocking_pdb(store.must_get("pods", "a", "default"), store.list("poddisruptionbudgets"), pods) is not None
    with pytest.raises(StoreError) as e:
        store.evict("default", "a")
    assert e.value.code == 429 and "web" in e.value.message
