"""Karpenter's alpha CapacityBuffer is not supported: `validate` and `simulate` refuse it by name with what to use
instead (a PodTemplate, maybe not a buffer's, gets the list of kinds and then that note), `plan` says so and plans
the rest (docs/api.md, "Kinds")."""

import json

import yaml

import manifests as shared
from cli_manifests import pair

BUFFER = """\
apiVersion: v1
kind: PodTemplate
metadata: {name: buffer-shape, namespace: default}
template:
  spec:
    containers:
      - name: pause
        image: pause
        resources: {requests: {cpu: "2", memory: 4Gi}}
---
apiVersion: autoscaling.x-k8s.io/v1alpha1
kind: CapacityBuffer
metadata: {name: web-buffer, namespace: default}
spec:
  podTemplateRef: {name: buffer-shape}
  replicas: 5
"""

WORKLOAD = yaml.safe_dump(shared.workload("web", {"containers": [{"name": "c", "image": "nginx", "resources": {
    "requests": {"cpu": "1", "memory": "1Gi"}}}]}, replicas=2, namespace="default"))

SAYS = "Karpenter's alpha CapacityBuffer, with the PodTemplate it names, is not supported by karpenter-lambda"
INSTEAD = "placeholder pods with the buffer's requests in a PriorityClass of negative value"


def test_validate_refuses_the_buffer_and_its_template_by_name(cli, manifests):
    f = manifests("buf.yaml", pair() + "---\n" + BUFFER)
    rc, out, err = cli("validate", f)
    assert rc == 1
    lines = err.splitlines()
    # the buffer: what to use instead, not the list of kinds
    assert lines[1].startswith(f"{f}:3: CapacityBuffer/web-buffer: kind: unsupported kind "
                               f"autoscaling.x-k8s.io/v1alpha1/CapacityBuffer: {SAYS}")
    assert INSTEAD in lines[1] and "expected karpenter.sh/v1 NodePool" not in lines[1]
    # a PodTemplate may be there for something else: the list of kinds, then the buffer's note
    assert lines[0].startswith(f"{f}:2: PodTemplate/buffer-shape: kind: unsupported kind v1/PodTemplate: "
                               "expected karpenter.sh/v1 NodePool")
    assert f"(nothing here reads a PodTemplate; {SAYS}" in lines[0] and INSTEAD in lines[0]
    assert lines[-1] == "invalid: 2 errors in 1 file (2 valid objects)"


def test_plan_says_it_is_not_read_and_plans_the_workloads(cli, manifests):
    f = manifests("buf.yaml", pair() + "---\n" + BUFFER + "---\n" + WORKLOAD)
    rc, out, err = cli("plan", "--json", f)
    assert rc == 0
    assert "not read" in err and "CapacityBuffer/web-buffer" in err
    assert f"plan: note: {SAYS}" in err and INSTEAD in err
    plan = json.loads(out)
    placed = [p for c in plan["nodeClaims"] for p in c["pods"]]
    assert len(placed) == 2 and all(p.startswith("default/web-") for p in placed)   # no capacity for the buffer
    assert plan["unschedulable"] == []


def test_simulate_refuses_it_before_running(cli, manifests):
    f = manifests("buf.yaml", pair() + "---\n" + BUFFER + "---\n" + WORKLOAD)
    rc, out, err = cli("simulate", f)
    assert rc != 0
    assert f"CapacityBuffer/web-buffer: {SAYS}" in err
    assert "PodTemplate/buffer-shape: simulate does not know the kind 'PodTemplate'" in err
