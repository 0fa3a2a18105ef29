"""api/crosscheck.pdb_warnings: a PodDisruptionBudget that, with the replicas of the workloads it selects, allows no
eviction at all is a warning (Karpenter never drains such nodes for consolidation; drift and expiration wait for the
terminationGracePeriod); percentages round up, as the disruption controller rounds them."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.crosscheck import pdb_warnings

from manifests import workload

WEB = workload("web", {"containers": [{"name": "c", "image": "nginx"}]}, replicas=3)


def _pdb(**spec) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


@pytest.mark.parametrize("spec,blocks", [({"minAvailable": 3}, True), ({"minAvailable": "100%"}, True),
                                          ({"maxUnavailable": 0}, True), ({"maxUnavailable": "0%"}, True),
                                          ({"minAvailable": 2}, False), ({"maxUnavailable": 1}, False),
                                          ({"maxUnavailable": "10%"}, False),   # 10% of 3 rounds up to 1
                                          ({"minAvailable": "90%"}, True)])     # 90% of 3 rounds up to 3
def test_a_budget_allowing_no_eviction_is_a_warning(spec, blocks):
    found = [(pos, e.path, e.message) for pos, e in pdb_warnings([WEB, _pdb(**spec)])]
    if not blocks:
        assert found == []
        return
    (field, value), = spec.items()
    assert found == [(1, f"spec.{field}", f"allows no eviction of its 3 pod(s) (Deployment/web: 3; {field} {value}): "
                                         "Karpenter never drains their nodes for consolidation, and drift or "
                                         "expiration waits until the NodePool's terminationGracePeriod (forever "
                                         "without one)")]
