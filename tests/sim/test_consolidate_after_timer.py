"""A run without --until does not stop while a NodeClaim's consolidateAfter is still running: the sweeps after it
ends may consolidate the node (sim/timers.py ``_add_consolidation_timers``).  Before, a run whose last change came
a lifecycle interval before that ended with an empty node of a ``consolidateAfter: 10m`` NodePool still there."""

from __future__ import annotations

import yaml

from karpenter_lambda.sim.simulator import Simulation

from manifests import nodeclass, nodepool, to_yaml, workload

WEB = workload("web", {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}],
                       "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                           {"labelSelector": {"matchLabels": {"app": "web"}},
                            "topologyKey": "kubernetes.io/hostname"}]}}}, replicas=2)
SCALE_DOWN = {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "down"},
              "spec": {"startTime": "2026-03-02T10:00:00Z",
                       "steps": [{"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web",
                                                        "replicas": 1}}]}}


def test_an_empty_node_is_removed_after_a_long_consolidate_after_before_the_run_ends(tmp_path):
    (tmp_path / "pools.yaml").write_text(to_yaml(nodepool(policy="WhenEmpty", consolidate_after="10m"), nodeclass()))
    (tmp_path / "work.yaml").write_text(yaml.safe_dump_all([WEB, SCALE_DOWN]))
    res = Simulation([tmp_path / "pools.yaml", tmp_path / "work.yaml"]).run()
    launched = [e for e in res.events if e.type == "NodeClaimLaunched"]
    empty = [e for e in res.events if e.type == "NodeClaimDisrupted" and e.extra.get("reason") == "Empty"]
    assert len(launched) == 2 and len(empty) == 1
    # not before its consolidateAfter: 10 minutes after the pod left (the scale-down at 3m)
    assert empty[0].time >= 13 * 60
    assert res.stopped_because.startswith("nothing changed") and len(res.nodeclaims) == 1
