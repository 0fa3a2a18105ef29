"""A pod's ``karpenter.sh/do-not-disrupt`` time limit is a simulator timer (sim/timers.py
``_add_do_not_disrupt_timers``): the consolidation it held back happens when it runs out, whatever ``--until`` says.

The scenario: six 1-CPU pods annotated ``karpenter.sh/do-not-disrupt: "10m"`` on one c6a.2xlarge (bound, hence
started, at +1m), scaled to one at +5m; ``consolidateAfter: 1m``.  The last pod's limit runs out at +11m, when the
sweeps (once a minute, as deployed) propose replacing the node by a smaller one, launched at the next sweep.

Before, the limit was no timer: the run without ``--until`` ended at +6m ("nothing changed for a full lifecycle
interval") with the c6a.2xlarge kept, ``--until 20m`` skipped its quiet stretch from +10m to the end (nothing
replaced) and ``--until 60m`` kept it too (the sweeps resumed only at +1h)."""

from __future__ import annotations

import copy

import pytest
import yaml

from karpenter_lambda.api.durations import parse_duration
from karpenter_lambda.controllers.sweep_shortcuts import SHORTCUTS_ENV
from karpenter_lambda.sim.simulator import Simulation

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: np}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: ["amd64"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m"]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "default"},
              "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "a"}},
                       "template": {"metadata": {"labels": {"app": "a"},
                                                 "annotations": {"karpenter.sh/do-not-disrupt": "10m"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {
                                        "requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}
SCALE_DOWN = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
              "spec": {"startTime": "2026-12-07T18:00:00Z",
                       "steps": [{"at": "5m", "scale": {"kind": "Deployment", "namespace": "default", "name": "a",
                                                        "replicas": 1}}]}}


def _consolidation(tmp_path, until: str | None, limit: str = "10m") -> tuple[float, dict]:
    """(time of the replacement's launch, the run's result) of the scenario run with ``until``, the pods'
    do-not-disrupt ``limit``."""
    deployment = copy.deepcopy(DEPLOYMENT)
    deployment["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = limit
    (tmp_path / "np.yaml").write_text(NODEPOOL)
    (tmp_path / "wl.yaml").write_text(yaml.safe_dump_all([deployment, SCALE_DOWN]))
    res = Simulation([tmp_path / "np.yaml", tmp_path / "wl.yaml"],
                     until=None if until is None else float(parse_duration(until))).run()
    launched = [e for e in res.events if e.type == "NodeClaimLaunched"]
    replaced = [e for e in launched if e.extra.get("reason") == "Underutilized"]
    assert len(launched) == 2 and len(replaced) == 1, [(e.time, e.type, e.message) for e in res.events]
    disrupted = [e for e in res.events if e.type == "NodeClaimDisrupted"]
    assert [e.extra.get("reason") for e in disrupted] == ["Underutilized"]
    return replaced[0].time, res


@pytest.mark.parametrize("until", [None, "60m"])   # (20m: the shortcut test below runs to it)
def test_consolidation_held_back_by_a_do_not_disrupt_limit_happens_when_it_runs_out(tmp_path, until):
    at, res = _consolidation(tmp_path, until)
    # the limit runs out at +11m (the pod started at +1m): not before; a sweep proposes, the next one launches
    assert 11 * 60 <= at <= 13 * 60
    assert at == 12 * 60   # the same decision time, whichever --until (the run with --until 12m launches at +12m)
    kept = res.nodeclaims
    assert len(kept) == 1 and kept[0]["instanceType"] != "c6a.2xlarge"


def test_the_sweep_shortcut_does_not_skip_the_sweep_where_a_do_not_disrupt_limit_runs_out(tmp_path, monkeypatch):
    """controllers/sweep_shortcuts.valid_until counts a pod's do-not-disrupt time limit: before, a quiet
    consolidation sweep's marker (its time + 5 min) skipped the sweeps after the limit ran out (+17m, not +13m)."""
    # "11m": the limit runs out at +12m; the marker of the quiet sweep at +6m is valid to +11m, the one at +11m to +12m
    monkeypatch.setenv(SHORTCUTS_ENV, "false")
    without, _ = _consolidation(tmp_path, "20m", "11m")
    monkeypatch.setenv(SHORTCUTS_ENV, "true")
    with_, _ = _consolidation(tmp_path, "20m", "11m")
    assert without == 13 * 60
    assert with_ == without
