"""The project's examples/ directory: every Karpenter object in it validates."""

from __future__ import annotations

from pathlib import Path

from karpenter_lambda.api.hashes import ec2nodeclass_hash, nodepool_hash
from karpenter_lambda.api.manifests import load_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_examples_validate():
    result = load_files([EXAMPLES], allow_other_kinds=True)
    assert [str(i) for i in result.issues] == []
    assert {"default.yaml", "spot-and-on-demand.yaml", "graviton.yaml", "gpu.yaml", "windows.yaml"} <= {p.name for p in EXAMPLES.glob("*.yaml")}


def test_default_pair_and_references_resolve():
    result = load_files([EXAMPLES], allow_other_kinds=True)
    pools = {o.name: o for o in result.of_kind("NodePool")}
    classes = {o.name: o for o in result.of_kind("EC2NodeClass")}
    assert "default" in pools and "default" in classes
    assert classes["default"].ami_alias == "al2023@latest"
    assert classes["default"].ami_family == "AL2023"
    for pool in pools.values():
        ref = pool.node_class_ref
        assert ref["group"] == "karpenter.k8s.aws" and ref["kind"] == "EC2NodeClass"
        assert ref["name"] in classes, f"NodePool {pool.name} references a missing EC2NodeClass {ref['name']}"


def test_example_features():
    result = load_files([EXAMPLES], allow_other_kinds=True)
    pools = {o.name: o for o in result.of_kind("NodePool")}
    assert any(t["key"] == "nvidia.com/gpu" for t in pools["gpu"].taints)
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]} in pools["graviton"].requirements
    assert pools["spot"].weight > pools["on-demand"].weight
    classes = {o.name: o for o in result.of_kind("EC2NodeClass")}
    assert classes["windows2022"].ami_family == "Windows2022"
    assert classes["bottlerocket-arm64"].ami_family == "Bottlerocket"


def test_examples_hash_distinctly():
    result = load_files([EXAMPLES], allow_other_kinds=True)
    pool_hashes = [nodepool_hash(o) for o in result.of_kind("NodePool")]
    class_hashes = [ec2nodeclass_hash(o) for o in result.of_kind("EC2NodeClass")]
    assert len(set(pool_hashes)) == len(pool_hashes)
    assert len(set(class_hashes)) == len(class_hashes)
