"""`simulate --serve` (issue 31 item 5): after the run the simulated cluster's API server stays up with a kubeconfig,
so the official client (and kubectl, where it is on PATH) sees the nodes and pods of the --json result; SIGTERM and
SIGINT end it with exit 0."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as kube_config

from karpenter_lambda.sim.kubeapi.serve import serve_store
from karpenter_lambda.sim.kubeapi.store import ObjectStore

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "karpenter-lambda")
POD = """apiVersion: v1
kind: Pod
metadata: {name: one}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("KARPENTER_LAMBDA_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path)})
    return env


def test_simulate_serve_shows_the_json_result_to_the_client_and_kubectl(tmp_path):
    (tmp_path / "pod.yaml").write_text(POD)
    cfg = tmp_path / "kc" / "config"
    out = (tmp_path / "out.json").open("w")
    err = (tmp_path / "err.txt").open("w")
    proc = subprocess.Popen([EXE, "simulate", "--json", "--serve", "--kubeconfig", str(cfg),
                             str(ROOT / "examples" / "default.yaml"), str(tmp_path / "pod.yaml")],
                            stdout=out, stderr=err, env=_env(tmp_path), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        while not cfg.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cfg.exists(), (tmp_path / "err.txt").read_text()
        result = json.loads((tmp_path / "out.json").read_text())   # printed whole before serving
        stderr = (tmp_path / "err.txt").read_text()
        assert f"export KUBECONFIG={cfg}" in stderr and "kubectl get nodes,pods -o wide" in stderr
        api = kube_config.new_client_from_config(config_file=str(cfg))
        core = k8s.CoreV1Api(api)
        # raw JSON: the simulated kubelet's nodeInfo lacks fields the client's Node model requires (systemUUID, ...)
        listed = json.loads(core.list_node(_preload_content=False).data)["items"]
        nodes = {n["metadata"]["name"] for n in listed}
        assert nodes and nodes == {c["nodeName"] for c in result["nodeClaims"]}
        pod = core.read_namespaced_pod("one", "default")
        assert pod.spec.node_name in nodes and ["default/one"] == [p for c in result["nodeClaims"] for p in c["pods"]]
        if shutil.which("kubectl"):
            got = subprocess.run(["kubectl", f"--kubeconfig={cfg}", f"--cache-dir={tmp_path / 'cache'}", "get", "nodes,pods",
                                  "-o", "wide"], capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path)})
            assert got.returncode == 0, got.stderr
            rows = [line.split() for line in got.stdout.splitlines()]
            assert ["pod/one", "1/1", "Running"] == next(r for r in rows if r and r[0] == "pod/one")[:3]
            assert {r[0] for r in rows if r and r[0].startswith("node/")} == {f"node/{n}" for n in nodes}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        err.close()


def test_serve_store_answers_until_sigint_then_exits_zero(tmp_path):
    t = [1_700_000_000.0]
    store = ObjectStore(clock=lambda: t[0])
    store.create("nodes", {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    t[0] += 600   # a finished run's clock, frozen at its end: ages are on it
    seen = {}

    def wait(stop: threading.Event) -> None:
        cfg = kube_config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        seen["nodes"] = [n.metadata.name for n in k8s.CoreV1Api(cfg).list_node().items]
        req = urllib.request.Request(cfg.configuration.host + "/api/v1/nodes",
                                     headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        seen["age"] = json.load(urllib.request.urlopen(req))["rows"][0]["cells"][3]
        os.kill(os.getpid(), signal.SIGINT)   # the handler serve_store installed turns it into a clean stop
        assert stop.wait(10)

    assert serve_store(store, tmp_path / "kubeconfig", "sim-cluster", wait=wait) == 0
    assert seen == {"nodes": ["n1"], "age": "10m"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # put back
