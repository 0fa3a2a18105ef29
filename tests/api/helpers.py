"""Valid base manifests and a tiny deep-merge used by the table-driven API tests."""

from __future__ import annotations

import copy

import yaml

import manifests as shared

DELETE = "__delete__"

# the shared NodePool / EC2NodeClass (tests/manifests.py), in their smallest valid form
BASE_NODEPOOL = shared.to_yaml(shared.nodepool(cpu_limit=None))
BASE_EC2NODECLASS = shared.to_yaml(shared.nodeclass(role="KarpenterNodeRole-my-cluster", discovery="my-cluster"))

BASE_NODECLAIM = """
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels:
    karpenter.sh/nodepool: default
spec:
  requirements:
    - key: karpenter.sh/nodepool
      operator: In
      values: ["default"]
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m5.large", "c5.large"]
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: default
"""

BASES = {"NodePool": BASE_NODEPOOL, "EC2NodeClass": BASE_EC2NODECLASS, "NodeClaim": BASE_NODECLAIM}


def merge(base, patch):
    """Dicts merge recursively, anything else replaces; the value DELETE removes a key."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            if v == DELETE:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v)
            else:
                out[k] = copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def manifest(kind: str, patch_yaml: str = "") -> dict:
    base = yaml.safe_load(BASES[kind])
    patch = yaml.safe_load(patch_yaml) if patch_yaml.strip() else {}
    return merge(base, patch)


def manifest_text(kind: str, patch_yaml: str = "") -> str:
    return yaml.safe_dump(manifest(kind, patch_yaml), sort_keys=False)
