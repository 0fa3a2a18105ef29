"""The watcher's manifests, image inputs and entry point."""

import ast
from pathlib import Path

import yaml

WATCHER = Path(__file__).resolve().parents[2] / "watcher"


def _docs():
    out = []
    for f in sorted((WATCHER / "manifests").glob("*.yaml")):
        out.extend(d for d in yaml.safe_load_all(f.read_text()) if d)
    return {(d["kind"], d["metadata"]["name"]): d for d in out}


def test_manifests_are_least_privilege_and_non_root():
    docs = _docs()
    assert ("Namespace", "karpenter-lambda") in docs
    sa = docs[("ServiceAccount", "karpenter-lambda-watcher")]
    assert sa["metadata"]["namespace"] == "karpenter-lambda"
    # Pod Identity (what the CDK stack associates) needs no IRSA annotation
    assert "eks.amazonaws.com/role-arn" not in (sa["metadata"].get("annotations") or {})
    role = docs[("ClusterRole", "karpenter-lambda-watcher")]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]}]
    binding = docs[("ClusterRoleBinding", "karpenter-lambda-watcher")]
    assert binding["subjects"][0]["name"] == "karpenter-lambda-watcher" and binding["roleRef"]["name"] == "karpenter-lambda-watcher"
    dep = docs[("Deployment", "karpenter-lambda-watcher")]
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "karpenter-lambda-watcher"
    assert pod["securityContext"]["runAsNonRoot"] is True
    c = pod["containers"][0]
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and c["securityContext"]["readOnlyRootFilesystem"] is True
    assert {e["name"] for e in c["env"]} >= {"CLUSTER_NAME", "POD_QUEUE_URL"}


def test_watcher_imports_only_kubernetes_boto3_and_stdlib():
    import sys

    allowed = {"kubernetes", "boto3", "botocore", "urllib3"} | set(sys.stdlib_module_names)
    for f in (WATCHER / "karpenter_lambda_watcher").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for n in names:
                assert n.split(".")[0] in allowed, f"{f.name} imports {n}"
    reqs = (WATCHER / "requirements.txt").read_text()
    pinned = [line.split("==")[0] for line in reqs.splitlines() if line.strip() and not line.startswith("#")]
    assert pinned == ["boto3"]   # no kubernetes (the watcher's own client in a pod), no karpenter_lambda
    assert "USER 65532" in (WATCHER / "Dockerfile").read_text()


def test_main_refuses_to_start_without_queue_or_cluster(monkeypatch):
    from karpenter_lambda_watcher.__main__ import main

    import logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    monkeypatch.delenv("POD_QUEUE_URL", raising=False)
    monkeypatch.setenv("CLUSTER_NAME", "c")
    try:
        assert main([]) == 2
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_deployment_sets_resync_default():
    dep = _docs()[("Deployment", "karpenter-lambda-watcher")]
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["RESYNC_SECONDS"] == "60"


def test_main_refuses_bad_resync_settings(monkeypatch, capsys):
    import logging

    from karpenter_lambda_watcher.__main__ import main

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    monkeypatch.setenv("POD_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/pods")
    monkeypatch.setenv("CLUSTER_NAME", "c")
    try:
        for name, value, msg in (
            ("RESYNC_SECONDS", "-5", "RESYNC_SECONDS must be a number >= 0, got '-5'"),
            ("RESYNC_SECONDS", "soon", "RESYNC_SECONDS must be a number >= 0, got 'soon'"),
            ("RESYNC_MAX_PODS", "0", "RESYNC_MAX_PODS must be an integer >= 1, got '0'"),
        ):
            with monkeypatch.context() as m:
                m.setenv(name, value)
                assert main([]) == 2
            out = capsys.readouterr().out
            assert msg in out, out
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_in_a_pod_the_watcher_does_not_import_the_official_client(tmp_path):
    """The watcher in a pod (the service account's files) or against ``KUBE_API_URL`` talks to the API server
    through its own client: ``kubernetes`` (~18 MB of a ~65 MB process) is never imported."""
    import subprocess
    import sys

    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    code = f"""
import os, sys
sys.path.insert(0, {str(WATCHER)!r})
from karpenter_lambda_watcher import kubeclient, __main__ as m
kubeclient.SA_DIR = {str(sa)!r}
os.environ.update(KUBERNETES_SERVICE_HOST="10.100.0.1", KUBERNETES_SERVICE_PORT="443")
os.environ.pop("KUBE_API_URL", None)
a = m._api_client()
os.environ["KUBE_API_URL"] = "http://127.0.0.1:1"
b = m._api_client()
print(type(a).__name__, a.host, type(b).__name__, b.host, "kubernetes" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["KubeHTTP", "https://10.100.0.1:443", "KubeHTTP", "http://127.0.0.1:1", "False"]


def test_main_off_a_cluster_without_kube_api_url_or_the_client_says_what_to_set(tmp_path):
    """Not in a pod, no KUBE_API_URL and no official client installed: exit 2 naming the settings, no traceback."""
    import subprocess
    import sys

    code = f"""
import sys
sys.path.insert(0, {str(WATCHER)!r})
sys.modules["kubernetes"] = None   # not installed (as in the image)
from karpenter_lambda_watcher.__main__ import main
sys.exit(main([]))
"""
    env = {"PATH": "/usr/bin:/bin", "POD_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/pods",
           "CLUSTER_NAME": "c", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 2, out.stderr
    assert "KUBE_API_URL is not set" in out.stdout and "Traceback" not in out.stderr + out.stdout
