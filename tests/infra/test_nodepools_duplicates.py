"""Issue 31: the nodePools folder (`make synth`) with a v1beta1 and a v1 object of one name is a clean
NodePoolValidationError (app.py prints it, exit 1) with one ``duplicate of FILE:DOC`` issue per repeat; the v1beta1
conversion never writes the duplicate's kubelet into the other file's EC2NodeClass."""

from __future__ import annotations

import pytest

import manifests as shared

V1BETA1 = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      kubelet: {maxPods: 20}
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-test
  amiFamily: AL2023
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
"""


def test_v1beta1_and_v1_of_one_name_are_duplicate_issues_not_a_traceback(tmp_path):
    from infra.nodepools import NodePoolValidationError, load_node_pools

    (tmp_path / "a-v1.yaml").write_text(shared.pair())
    (tmp_path / "b-v1beta1.yaml").write_text(V1BETA1)
    with pytest.raises(NodePoolValidationError) as e:
        load_node_pools(tmp_path)
    a, b = tmp_path / "a-v1.yaml", tmp_path / "b-v1beta1.yaml"
    assert [str(i) for i in e.value.issues] == [f"{b}:0: NodePool/default: duplicate of {a}:0",
                                                f"{b}:1: EC2NodeClass/default: duplicate of {a}:1"]
    assert str(e.value).startswith(f"context parameter nodePools: 2 problem(s) in {tmp_path}:\n")


def test_one_version_of_each_still_loads(tmp_path):
    from infra.nodepools import load_node_pools

    (tmp_path / "b-v1beta1.yaml").write_text(V1BETA1)
    objs = load_node_pools(tmp_path)
    nodeclass = next(o for o in objs if o.kind == "EC2NodeClass")
    assert nodeclass.spec["kubelet"]["maxPods"] == 20   # the conversion moved the NodePool's kubelet there
