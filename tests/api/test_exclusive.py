"""Node requirements of a pod that exclude each other (api/exclusive.py), the one reading behind validate's warning
and the scheduler's explanation."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.exclusive import describe, exclusive

ZONE, ARCH, CPU = "topology.kubernetes.io/zone", "kubernetes.io/arch", "karpenter.k8s.aws/instance-cpu"


def term(*exprs: tuple) -> dict:
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": list(v)} if v is not None else {})}
                                 for k, op, v in exprs]}


@pytest.mark.parametrize("selector, t, said", [
    ({ZONE: "us-east-1a"}, term((ZONE, "In", ["us-east-1b", "us-east-1c"])),
     f"{ZONE} In [us-east-1a] (nodeSelector) and {ZONE} In [us-east-1b us-east-1c]"),
    ({"topology.ebs.csi.aws.com/zone": "us-east-1a"}, term((ZONE, "In", ["us-east-1b"])),        # an alias of the key
     f"{ZONE} In [us-east-1a] (nodeSelector) and {ZONE} In [us-east-1b]"),
    (None, term((ARCH, "In", ["arm64"]), (ARCH, "NotIn", ["arm64"])), f"{ARCH} In [arm64] and {ARCH} NotIn [arm64]"),
    (None, term((CPU, "In", ["2", "4"]), (CPU, "Gt", ["8"])), f"{CPU} In [2 4] and {CPU} Gt 8"),
    (None, term((CPU, "Gt", ["4"]), (CPU, "Lt", ["5"])), f"{CPU} Gt 4 and {CPU} Lt 5"),
    (None, term((CPU, "In", ["big"]), (CPU, "Lt", ["5"])), f"{CPU} In [big] and {CPU} Lt 5"),
])
def test_requirements_with_no_value_left_are_named(selector, t, said):
    (key, asks), = exclusive(selector, t)
    assert describe(key, asks, mark_selector=True) == said


@pytest.mark.parametrize("selector, t", [
    ({ZONE: "us-east-1a"}, term((ZONE, "In", ["us-east-1a", "us-east-1b"]))),
    (None, term((ARCH, "In", ["arm64", "amd64"]), (ARCH, "NotIn", ["arm64"]))),
    (None, term((CPU, "Gt", ["4"]), (CPU, "Lt", ["6"]))),                       # 5 is left
    (None, term((CPU, "In", ["8"]), (CPU, "Gt", ["4"]), (CPU, "Exists", None))),
    (None, term(("team", "DoesNotExist", None), ("team", "In", ["a"]))),          # DoesNotExist: left alone
    ({ZONE: "us-east-1a"}, None),
    (None, term((ZONE, "In", ["us-east-1a"]))),
])
def test_what_a_value_satisfies_is_not_a_conflict(selector, t):
    assert exclusive(selector, t) == []
