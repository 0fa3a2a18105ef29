"""The real kubectl against the local API server (issue 31 item 4): short names and Table output, client-side
apply with server-side validation, ``--server-side``, ``--dry-run=server``, ``explain`` and a ``drain`` that evicts
(honouring a PodDisruptionBudget) instead of deleting.  Skipped where no kubectl is on PATH."""

import shutil
import subprocess

import pytest

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on PATH (the Makefile does not install one)")

POD = """apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec: {containers: [{name: c, image: nginx:1}]}
"""


@pytest.fixture
def kubectl(server, tmp_path):
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: local, cluster: {{server: "{server.url}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: local, context: {{cluster: local, user: u, namespace: default}}}}]
current-context: local
""")

    def run(*args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([KUBECTL, f"--kubeconfig={cfg}", f"--cache-dir={tmp_path / 'cache'}", *args],
                              input=stdin, capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path)})
        if ok:
            assert proc.returncode == 0, proc.stderr
        return proc

    return run


def test_get_short_names_and_wide_table(server, kubectl):
    server.store.create("nodes", {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                                       "nodeInfo": {"kubeletVersion": "v1.31.2"}}})
    server.store.create("pods", {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c"}]}})
    server.store.bind("default", "web", "n1")
    out = kubectl("get", "no,po", "-o", "wide").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                              "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert out[1].split()[:3] == ["node/n1", "Ready", "<none>"] and out[1].split()[4] == "v1.31.2"
    pods = [line.split() for line in out if line.startswith("pod/")]
    assert pods[0][:3] == ["pod/web", "1/1", "Running"] and pods[0][6] == "n1"
    assert kubectl("get", "all").stdout.count("pod/web") == 1


def test_apply_validates_on_the_server_and_dry_run_server_saves_nothing(server, kubectl):
    assert "pod/web created" in kubectl("apply", "-f", "-", stdin=POD).stdout
    bad = POD.replace("image: nginx:1", "image: nginx:1, imagePolicy: x")
    proc = kubectl("apply", "-f", "-", stdin=bad.replace("name: web,", "name: other,"), ok=False)
    assert proc.returncode != 0 and 'unknown field "spec.containers[0].imagePolicy"' in proc.stderr
    proc = kubectl("apply", "--dry-run=server", "-f", "-", stdin=POD.replace("nginx:1", "nginx:2"))
    assert "(server dry run)" in proc.stdout
    assert server.store.get("pods", "web")["spec"]["containers"][0]["image"] == "nginx:1"
    assert "pod/web configured" in kubectl("apply", "-f", "-", stdin=POD.replace("nginx:1", "nginx:2")).stdout
    assert server.store.get("pods", "web")["spec"]["containers"][0]["image"] == "nginx:2"


def test_server_side_apply_and_explain(server, kubectl):
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: '1'}\n"
    assert "configmap/cfg serverside-applied" in kubectl("apply", "--server-side", "-f", "-", stdin=cm).stdout
    managed = server.store.get("configmaps", "cfg")["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in managed] == [("kubectl", "Apply")]
    out = kubectl("explain", "pod.spec.containers").stdout
    assert "KIND:       Pod" in out and "FIELD: containers <[]Container>" in out and "image\t<string>" in out


def test_drain_evicts_through_the_budget_and_its_dry_run_changes_nothing(server, kubectl):
    server.store.create("nodes", {"metadata": {"name": "n1"}})
    for name in ("web-0", "web-1"):
        server.store.create("pods", {"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}})
        server.store.bind("default", name, "n1")
    server.store.create("poddisruptionbudgets", {"metadata": {"name": "web"}, "spec": {
        "minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    proc = kubectl("drain", "n1", "--force", "--dry-run=server", "--timeout=20s", "--pod-selector=app=web")
    assert "(server dry run)" in proc.stdout
    assert not (server.store.get("nodes", "n1").get("spec") or {}).get("unschedulable")
    assert {p["metadata"]["name"] for p in server.store.list("pods")} == {"web-0", "web-1"}
    proc = kubectl("drain", "n1", "--force", "--timeout=4s", ok=False)
    evictions = server.requests("POST", r"/pods/web-\d/eviction$")
    assert evictions and not server.requests("DELETE", r"/pods/web-")   # evicted through the API, never deleted
    assert {e[2] for e in evictions} == {201, 429}   # one allowed by the budget, the other refused until the timeout
    assert len(server.store.list("pods")) == 1 and server.store.get("nodes", "n1")["spec"]["unschedulable"] is True
    assert "disruption budget" in proc.stderr
