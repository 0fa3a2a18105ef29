"""Karpenter's CRD defaults are applied, only where the CRD applies them, on a new dict."""

from __future__ import annotations

import copy

from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.validation import apply_defaults, validate_and_default

from .helpers import manifest, manifest_text

METADATA_DEFAULTS = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}


def test_nodepool_defaults():
    doc = manifest("NodePool")
    before = copy.deepcopy(doc)
    out, errors = validate_and_default("NodePool", doc)
    assert errors == []
    assert doc == before, "the input must not be modified"
    assert out is not doc
    assert out["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert out["spec"]["disruption"] == {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}
    # not defaulted by the CRD
    assert "weight" not in out["spec"] and "limits" not in out["spec"]
    assert "terminationGracePeriod" not in out["spec"]["template"]["spec"]


def test_nodepool_explicit_values_kept():
    doc = manifest("NodePool", "spec:\n  template:\n    spec:\n      expireAfter: Never\n  disruption:\n    consolidationPolicy: WhenEmpty\n    consolidateAfter: 5m\n    budgets: [{nodes: '3', reasons: [Empty]}]\n")
    out, errors = validate_and_default("NodePool", doc)
    assert errors == []
    assert out["spec"]["template"]["spec"]["expireAfter"] == "Never"
    assert out["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m", "budgets": [{"nodes": "3", "reasons": ["Empty"]}]}


def test_partial_disruption_gets_policy_and_budgets():
    out, errors = validate_and_default("NodePool", manifest("NodePool", "spec:\n  disruption:\n    consolidateAfter: Never\n"))
    assert errors == []
    assert out["spec"]["disruption"] == {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]}


def test_budget_nodes_default_inside_a_budget():
    out, errors = validate_and_default("NodePool", manifest("NodePool", "spec:\n  disruption:\n    consolidateAfter: 0s\n    budgets:\n      - {schedule: '@daily', duration: 10m}\n"))
    assert errors == []
    assert out["spec"]["disruption"]["budgets"] == [{"schedule": "@daily", "duration": "10m", "nodes": "10%"}]


def test_null_field_is_treated_as_omitted():
    out, errors = validate_and_default("NodePool", manifest("NodePool", "spec:\n  template:\n    spec:\n      expireAfter: null\n  weight: null\n"))
    assert errors == []
    assert out["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert "weight" not in out["spec"]


def test_ec2nodeclass_metadata_options_default():
    out, errors = validate_and_default("EC2NodeClass", manifest("EC2NodeClass"))
    assert errors == []
    assert out["spec"]["metadataOptions"] == METADATA_DEFAULTS
    # block devices are NOT a CRD default (the AMI family picks them at launch time)
    assert "blockDeviceMappings" not in out["spec"]
    assert "amiFamily" not in out["spec"]  # inferred from the alias at use, not written by the CRD


def test_ec2nodeclass_partial_metadata_options():
    out, errors = validate_and_default("EC2NodeClass", manifest("EC2NodeClass", "spec:\n  metadataOptions:\n    httpPutResponseHopLimit: 2\n"))
    assert errors == []
    assert out["spec"]["metadataOptions"] == dict(METADATA_DEFAULTS, httpPutResponseHopLimit=2)


def test_nodeclaim_defaults_and_nodepool_requirement_allowed():
    out, errors = validate_and_default("NodeClaim", manifest("NodeClaim"))
    assert errors == []
    assert out["spec"]["expireAfter"] == "720h"
    assert out["spec"]["requirements"][0]["key"] == "karpenter.sh/nodepool"


def test_status_is_kept():
    doc = manifest("NodeClaim", "status:\n  providerID: aws:///us-east-1a/i-0123\n  conditions:\n    - {type: Launched, status: 'True'}\n")
    obj = load_text(manifest_text("NodeClaim", "status:\n  providerID: aws:///us-east-1a/i-0123\n  conditions:\n    - {type: Launched, status: 'True'}\n")).objects[0]
    assert obj.is_true("Launched")
    assert obj.status["providerID"] == doc["status"]["providerID"]


def test_loaded_objects_carry_defaults():
    result = load_text(manifest_text("NodePool") + "---\n" + manifest_text("EC2NodeClass"), "pair.yaml")
    assert result.ok
    np, nc = result.objects
    assert np.expire_after == "720h"
    assert np.disruption["budgets"] == [{"nodes": "10%"}]
    assert nc.spec["metadataOptions"]["httpTokens"] == "required"


def test_weight_bounds_valid():
    for w in (1, 100):
        assert validate_and_default("NodePool", manifest("NodePool", f"spec:\n  weight: {w}\n"))[1] == []


def test_apply_defaults_ignores_errors_but_still_defaults():
    out = apply_defaults("NodePool", manifest("NodePool", "spec:\n  weight: 0\n"))
    assert out["spec"]["weight"] == 0
    assert out["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_valid_edge_values():
    patch = """
spec:
  replicas: 0
  limits:
    nodes: '5'
  disruption:
    consolidationPolicy: Balanced
    consolidateAfter: 1h30m
    budgets:
      - {nodes: '0', schedule: '*/15 9-17 * JAN-DEC MON-FRI', duration: 1h30m}
      - {nodes: 100%, schedule: '0 0 1,15 * *', duration: 2h0m0s}
      - {nodes: '0%', schedule: '@hourly', duration: 5m, reasons: [Underutilized, Empty, Drifted]}
  template:
    metadata:
      labels:
        node.kubernetes.io/role: worker
        karpenter.sh/capacity-type: spot
        example.com/team: ''
        karpenter.k8s.aws/instance-family: m5
        karpenter.k8s.aws/nitro-sandbox: 'true'
        node-role.kubernetes.io/worker: ''
        example.k8s.io/team: a
    spec:
      terminationGracePeriod: 48h
      requirements:
        - {key: karpenter.k8s.aws/instance-memory, operator: Gte, values: ['0']}
        - {key: topology.kubernetes.io/zone, operator: NotIn, values: [us-east-1a]}
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist}
        - {key: karpenter.sh/capacity-type, operator: In, values: [reserved, future-type]}
        - {key: failure-domain.beta.kubernetes.io/zone, operator: Exists}
        - {key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [default, dedicated]}
      taints:
        - {key: a, effect: NoSchedule}
        - {key: a, effect: NoExecute}
"""
    out, errors = validate_and_default("NodePool", manifest("NodePool", patch))
    assert errors == []
