"""Every NodePool and EC2NodeClass in Karpenter's own examples validates with zero issues."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_lambda.api.manifests import load_files

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "data" / "karpenter-examples"
FILES = sorted(EXAMPLES.glob("*.yaml")) if EXAMPLES.is_dir() else []

pytestmark = pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"upstream examples directory {EXAMPLES} is absent")


def test_the_directory_holds_the_expected_examples():
    assert len(FILES) >= 20
    assert {"general-purpose.yaml", "core-kwok-readme-nodepool.yaml", "windows-custom-userdata.yaml"} <= {f.name for f in FILES}


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_upstream_example_validates(path):
    result = load_files([path], allow_other_kinds=True)
    assert [str(i) for i in result.issues] == []
    karpenter = [o for o in result.objects if o.kind in ("NodePool", "EC2NodeClass")]
    assert karpenter, f"{path.name} holds no NodePool or EC2NodeClass"
    for obj in karpenter:
        # defaults were applied
        if obj.kind == "NodePool":
            assert obj.template_spec["expireAfter"]
            assert obj.disruption["budgets"]
            assert obj.disruption["consolidationPolicy"] in ("WhenEmpty", "WhenEmptyOrUnderutilized")
        else:
            assert obj.spec["metadataOptions"]["httpTokens"] in ("required", "optional")


def test_kwok_nodeclass_is_ignored_but_its_nodepool_validates():
    result = load_files([EXAMPLES / "core-kwok-readme-nodepool.yaml"], allow_other_kinds=True)
    assert result.ok
    kinds = sorted(o.kind for o in result.objects)
    assert kinds == ["KWOKNodeClass", "NodePool"]
    np = result.of_kind("NodePool")[0]
    assert np.node_class_ref == {"name": "default", "kind": "KWOKNodeClass", "group": "karpenter.kwok.sh"}
    assert np.disruption["consolidateAfter"] == "10s"


def test_all_upstream_examples_together():
    """Loaded together they define the same objects several times (EC2NodeClass "default" in most files): each
    repeat is one "duplicate of FILE:DOC" error, and every object loads once."""
    result = load_files(FILES, allow_other_kinds=True)
    assert result.issues and all(" duplicate of " in str(i) for i in result.issues)
    singles = [load_files([f], allow_other_kinds=True) for f in FILES]
    assert all(r.ok for r in singles)
    assert sum(len(r.of_kind("NodePool")) for r in singles) >= 24
    assert sum(len(r.of_kind("EC2NodeClass")) for r in singles) >= 22
    names = {(o.kind, o.name) for r in singles for o in r.objects}
    assert {(o.kind, o.name) for o in result.objects} == names
    assert len(result.objects) == len(names)
