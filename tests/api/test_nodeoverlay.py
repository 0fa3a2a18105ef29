"""NodeOverlay manifests (karpenter.sh/v1alpha1): Karpenter's docs examples load, every CRD / runtime rule is reported
in the ``FILE:DOC: Kind/name: field: message`` form."""

from __future__ import annotations

import textwrap

import pytest

from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.objects import NodeOverlay

# the examples of Karpenter's NodeOverlays page (website/content/en/docs/concepts/nodeoverlays.md), price and
# priceAdjustment split into two objects (the page shows both to list them; the CRD forbids them together)
DOCS = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: example-overlay
spec:
  weight: 10
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m5.large", "m5.xlarge"]
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["spot"]
    - key: karpenter.k8s.aws/instance-cpu
      operator: Gte
      values: ["32"]
  priceAdjustment: "+10%"
  capacity:
    hugepages-2Mi: 100Mi
    hugepages-1Gi: 2Gi
    custom-device/gpu-slice: 4
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: preview-instance-pricing
spec:
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m8x.large"]
  price: "5.00"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: g6f-fractional-gpu
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["g6f"]
  capacity:
    nvidia.com/gpu: "1"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: all-types
spec:
  requirements: []
  priceAdjustment: "-0.5"
"""


def test_docs_examples_load_as_typed_overlays():
    result = load_text(DOCS, "overlays.yaml")
    assert [str(i) for i in result.issues] == []
    overlays = result.of_kind("NodeOverlay")
    assert [type(o) for o in overlays] == [NodeOverlay] * 4
    ex, preview, gpu, every = overlays
    assert (ex.weight, ex.price_change, ex.capacity["custom-device/gpu-slice"]) == (10, "+10%", 4)
    assert (preview.weight, preview.price_change) == (0, "5.00")
    assert gpu.price_change is None and gpu.capacity == {"nvidia.com/gpu": "1"}
    assert every.requirements == [] and every.price_change == "-0.5"


def overlay_doc(spec: str) -> str:
    return ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: o\nspec:\n"
            + textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ") + "\n")


REQ = "requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]\n"
CASES = [
    ("no-requirements", "price: '1'", "spec.requirements", "Required value"),
    ("both-prices", REQ + "price: '1'\npriceAdjustment: '+1'", "spec.priceAdjustment", "cannot set both 'price' and 'priceAdjustment'"),
    ("price-signed", REQ + "price: '-1'", "spec.price", "invalid value '-1'"),
    ("price-number", REQ + "price: 1.5", "spec.price", "must be a string, got number 1.5"),
    ("price-percent", REQ + "price: '10%'", "spec.price", "invalid value '10%'"),
    ("adjustment-unsigned", REQ + "priceAdjustment: '10%'", "spec.priceAdjustment", "must be a signed amount"),
    ("adjustment-below-100", REQ + "priceAdjustment: '-120%'", "spec.priceAdjustment", "invalid value '-120%'"),
    ("adjustment-word", REQ + "priceAdjustment: '+ten'", "spec.priceAdjustment", "invalid value"),
    ("capacity-cpu", REQ + "capacity: {cpu: '1'}", "spec.capacity[cpu]", "invalid resource restricted"),
    ("capacity-pods", REQ + "capacity: {pods: '10'}", "spec.capacity[pods]", "invalid resource restricted"),
    ("capacity-memory", REQ + "capacity: {memory: 1Gi}", "spec.capacity[memory]", "invalid resource restricted"),
    ("capacity-storage", REQ + "capacity: {ephemeral-storage: 1Gi}", "spec.capacity[ephemeral-storage]", "invalid resource restricted"),
    ("capacity-bad-quantity", REQ + "capacity: {example.com/x: lots}", "spec.capacity[example.com/x]", "lots"),
    ("weight-zero", REQ + "weight: 0", "spec.weight", "between 1 and 10000"),
    ("weight-too-big", REQ + "weight: 10001", "spec.weight", "between 1 and 10000"),
    ("req-notin-empty", "requirements: [{key: kubernetes.io/arch, operator: NotIn}]", "spec.requirements[0].values", "'NotIn' must have a value"),
    ("req-in-empty", "requirements: [{key: kubernetes.io/arch, operator: In}]", "spec.requirements[0].values", "operator In requires at least one value"),
    ("req-gte-two", "requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ['1', '2']}]", "spec.requirements[0].values", "exactly one value"),
    ("req-hostname", "requirements: [{key: kubernetes.io/hostname, operator: Exists}]", "spec.requirements[0].key", "restricted"),
    ("req-karpenter-domain", "requirements: [{key: karpenter.sh/foo, operator: Exists}]", "spec.requirements[0].key", "karpenter.sh/capacity-type and karpenter.sh/nodepool"),
    ("req-minvalues", "requirements: [{key: kubernetes.io/arch, operator: Exists, minValues: 1}]", "spec.requirements[0].minValues", "unknown field"),
    ("unknown-field", REQ + "prise: '1'", "spec.prise", 'unknown field (did you mean "price"?)'),
]


@pytest.mark.parametrize("name,spec,path,message", CASES, ids=[c[0] for c in CASES])
def test_invalid_overlay_reports_path_and_message(name, spec, path, message):
    result = load_text(overlay_doc(spec), "o.yaml")
    lines = [str(i) for i in result.issues]
    assert any(line.startswith(f"o.yaml:0: NodeOverlay/o: {path}: ") and message in line for line in lines), lines
    assert result.objects == []


def test_nodepool_key_is_allowed_in_overlays_not_in_nodepools():
    ok = load_text(overlay_doc("requirements: [{key: karpenter.sh/nodepool, operator: In, values: [gpu]}]\nprice: '1'"), "o.yaml")
    assert ok.ok


def test_other_nodeoverlay_versions_are_refused_with_the_version_to_use():
    text = overlay_doc("requirements: []").replace("karpenter.sh/v1alpha1", "karpenter.sh/v1")
    result = load_text(text, "o.yaml")
    assert [str(i) for i in result.issues] == [
        "o.yaml:0: NodeOverlay/o: apiVersion: unsupported apiVersion/kind karpenter.sh/v1/NodeOverlay "
        "(expected karpenter.sh/v1alpha1, the only NodeOverlay version)"]
