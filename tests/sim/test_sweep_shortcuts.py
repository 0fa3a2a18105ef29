"""Quiet sweeps cost almost nothing (issue 32 item 2), and decide the same.

One scenario -- two NodePools (one consolidating after 2 minutes), a scale-down that empties nodes, an AMI release that
drifts every node -- is simulated with the shortcuts (consolidation: ``controllers/sweep_shortcuts.py``; drift:
``controllers/quiet_drift.py``; lifecycle: ``controllers/quiet_lifecycle.py``) on and off
(``KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false``): the event streams are the same, event for event (EC2 instance ids,
which moto draws at random, named by order of appearance), and the run with the shortcuts did skip sweeps.  A second
scenario drives the drift and lifecycle shortcuts: a NodePool template change (NodePoolDrifted), expiration
(``expireAfter``) and an AMI release (AMIDrift), each after a quiet stretch.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import yaml

from karpenter_lambda.controllers.sweep_shortcuts import SHORTCUTS_ENV, enabled
from karpenter_lambda.sim.simulator import Simulation

POOLS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 2m, budgets: [{nodes: "2"}]}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: batch}
spec:
  weight: 50
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5]}
      taints: [{key: workload, value: batch, effect: NoSchedule}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""


def _deployment(name: str, replicas: int, batch: bool = False) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "nginx",
                                  "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
                  "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                      {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    if batch:
        spec["tolerations"] = [{"key": "workload", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


SCENARIO = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "quiet"},
            "spec": {"startTime": "2026-03-02T10:00:00Z",
                     "steps": [{"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web",
                                                      "replicas": 1}},
                               {"at": "10m", "releaseAMI": {"family": "al2023"}}]}}


def _run(tmp_path: Path, monkeypatch, shortcuts: bool, pools: str = POOLS, docs: list | None = None,
         until: float = 20 * 60.0) -> tuple[list, str]:
    monkeypatch.setenv(SHORTCUTS_ENV, "true" if shortcuts else "false")
    assert enabled() is shortcuts
    (tmp_path / "pools.yaml").write_text(pools)
    (tmp_path / "work.yaml").write_text(yaml.safe_dump_all(
        docs if docs is not None else [_deployment("web", 3), _deployment("jobs", 1, batch=True), SCENARIO]))
    logs = io.StringIO()
    res = Simulation([tmp_path / "pools.yaml", tmp_path / "work.yaml"], until=until, handler_logs=logs).run()
    ids: dict[str, str] = {}

    def name(m: re.Match) -> str:
        return ids.setdefault(m.group(0), f"i-{len(ids):04d}")

    events = [json.loads(re.sub(r"\bi-[0-9a-f]{8,17}\b", name, json.dumps(
        {"time": e.time, "type": e.type, "object": e.object, "message": e.message, **e.extra}, sort_keys=True)))
        for e in res.events]
    return events, logs.getvalue()


def test_the_same_events_with_and_without_the_shortcut(tmp_path, monkeypatch):
    without, logs_off = _run(tmp_path, monkeypatch, shortcuts=False)
    with_, logs_on = _run(tmp_path, monkeypatch, shortcuts=True)
    types = {e["type"] for e in without}
    # the scenario does what it is for: empty nodes consolidated, every node drifted and replaced
    assert {"NodeClaimLaunched", "NodeClaimDisrupted", "AMIReleased"} <= types
    reasons = {e.get("reason") for e in without if e["type"] == "NodeClaimDisrupted"}
    assert {"Empty", "Drifted"} <= reasons, reasons
    assert with_ == without
    # the shortcut was taken (and never without it)
    assert logs_on.count("cluster unchanged since a sweep that found nothing") >= 3
    assert "cluster unchanged since a sweep that found nothing" not in logs_off


# -- drift and expiration: the drift and lifecycle shortcuts ----------------------------------------------------------

EXPIRING = POOLS.replace("""      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 2m, budgets: [{nodes: "2"}]}""",
                         """      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 9m
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: Never}""")
BATCH_CHANGED = yaml.safe_load(POOLS.split("---")[2])
BATCH_CHANGED["spec"]["template"].setdefault("metadata", {})["labels"] = {"tier": "batch"}
DRIFT_SCENARIO = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "drifts"},
                  "spec": {"startTime": "2026-03-02T10:00:00Z",
                           "steps": [{"at": "4m", "apply": BATCH_CHANGED},
                                     {"at": "15m", "releaseAMI": {"family": "al2023"}}]}}
DRIFT_SKIPPED = "drift and expiration inputs unchanged since a sweep that found nothing"
LIFECYCLE_SKIPPED = "lifecycle: nothing launching, registering, deleting or unhealthy and nothing changed"


def test_drift_and_expiration_the_same_with_and_without_the_shortcuts(tmp_path, monkeypatch):
    assert "expireAfter: 9m" in EXPIRING
    jobs = _deployment("jobs", 1, batch=True)
    jobs["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "batch"}
    docs = [_deployment("web", 2), jobs, DRIFT_SCENARIO]
    without, logs_off = _run(tmp_path, monkeypatch, False, EXPIRING, docs, until=20 * 60.0)
    with_, logs_on = _run(tmp_path, monkeypatch, True, EXPIRING, docs, until=20 * 60.0)
    disrupted = [(e["object"], e.get("reason")) for e in without if e["type"] == "NodeClaimDisrupted"]
    reasons = {r for _o, r in disrupted}
    # the scenario does what it is for: the batch node drifted (template), the general nodes expired, then the AMI
    assert {"Drifted", "Expired"} <= reasons, disrupted
    kinds = {e["message"].split("(")[-1].split(")")[0] for e in without
             if e["type"] == "NodeClaimDisrupted" and e.get("reason") == "Drifted"}
    assert {"NodePoolDrifted", "AMIDrift"} <= kinds, kinds   # the template change, then the AMI release
    # every replacement launch names what it replaces for (an expiration's too: docs/simulator.md event guarantees)
    replacing = [e for e in without if e["type"] == "NodeClaimLaunched" and e.get("replaces")]
    assert {e.get("reason") for e in replacing} >= {"Expired"} and all(e.get("reason") for e in replacing), replacing
    assert with_ == without
    # the drift and lifecycle sweeps were skipped in the quiet stretches (and never without the shortcuts)
    assert logs_on.count(DRIFT_SKIPPED) >= 3
    assert logs_on.count(LIFECYCLE_SKIPPED) >= 3
    assert DRIFT_SKIPPED not in logs_off and LIFECYCLE_SKIPPED not in logs_off
