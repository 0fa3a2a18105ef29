"""NodeOverlay in `simulate` (issue 30 item 5): an overlay's price steers the simulated launch, end to end."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WORKLOAD = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: "1", memory: 2Gi}}}]
"""

OVERLAY = """apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: savings-plan-m6i}
spec:
  weight: 10
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: ["m6i.2xlarge"]}
    - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
  price: "0.0042"
"""


def _simulate(tmp_path, *files):
    proc = subprocess.run([sys.executable, "-m", "karpenter_lambda", "simulate", "--quiet", "--json", "--until", "5m",
                           str(ROOT / "examples" / "default.yaml"), *map(str, files)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_an_overlay_price_decides_what_simulate_launches(tmp_path):
    (tmp_path / "web.yaml").write_text(WORKLOAD)
    (tmp_path / "overlay.yaml").write_text(OVERLAY)
    with_overlay = _simulate(tmp_path, tmp_path / "web.yaml", tmp_path / "overlay.yaml")
    types = {c["instanceType"] for c in with_overlay["nodeClaims"]}
    assert types == {"m6i.2xlarge"}, with_overlay["nodeClaims"]
    assert with_overlay["pods"]["bound"] == 3
    assert len(with_overlay["nodeClaims"]) == 1   # 3 x (1 cpu, 2Gi) fit one m6i.2xlarge (8 vCPU, 32 GiB)
