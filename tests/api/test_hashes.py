"""Static-drift hashes: stable, order independent, defaults applied, the right fields in and out."""

from __future__ import annotations

import copy

import pytest

from karpenter_lambda.api import hashes
from karpenter_lambda.api.hashes import EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION, ec2nodeclass_hash, nodepool_hash
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.objects import EC2NodeClass, NodePool

from .helpers import manifest, manifest_text

RICH_NP = """
spec:
  template:
    metadata:
      labels: {team: a, tier: web}
      annotations: {example.com/owner: me}
    spec:
      taints:
        - {key: a, effect: NoSchedule}
        - {key: b, value: x, effect: NoExecute}
      startupTaints:
        - {key: init, effect: NoSchedule}
"""
RICH_NC = """
spec:
  tags: {team: a, env: prod}
  blockDeviceMappings:
    - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 20Gi, volumeType: gp3}}
    - {deviceName: /dev/xvdb, ebs: {volumeSize: 100Gi, volumeType: gp3}}
  kubelet:
    maxPods: 50
    systemReserved: {cpu: 100m, memory: 100Mi}
"""


def np(patch: str = "") -> NodePool:
    return NodePool(manifest("NodePool", patch))


def nc(patch: str = "") -> EC2NodeClass:
    return EC2NodeClass(manifest("EC2NodeClass", patch))


def test_versions():
    assert NODEPOOL_HASH_VERSION == "v3"
    assert EC2NODECLASS_HASH_VERSION == "v4"


def test_stable_and_decimal():
    h = nodepool_hash(np(RICH_NP))
    assert h == nodepool_hash(np(RICH_NP))
    assert h.isdigit() and 0 <= int(h) < 2**64
    assert ec2nodeclass_hash(nc(RICH_NC)) == ec2nodeclass_hash(nc(RICH_NC))


def test_accepts_dicts_and_objects_alike():
    assert nodepool_hash(manifest("NodePool", RICH_NP)) == nodepool_hash(np(RICH_NP))
    assert ec2nodeclass_hash(manifest("EC2NodeClass", RICH_NC)) == ec2nodeclass_hash(nc(RICH_NC))


def _reverse(value):
    if isinstance(value, dict):
        return {k: _reverse(v) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [_reverse(v) for v in reversed(value)]
    return value


def test_key_and_list_order_do_not_matter():
    a = manifest("NodePool", RICH_NP)
    assert nodepool_hash(a) == nodepool_hash(_reverse(a))
    b = manifest("EC2NodeClass", RICH_NC)
    assert ec2nodeclass_hash(b) == ec2nodeclass_hash(_reverse(b))


def test_defaults_applied_before_hashing():
    assert nodepool_hash(np()) == nodepool_hash(np("spec:\n  template:\n    spec:\n      expireAfter: 720h\n"))
    assert nodepool_hash(np()) != nodepool_hash(np("spec:\n  template:\n    spec:\n      expireAfter: 721h\n"))
    assert ec2nodeclass_hash(nc()) == ec2nodeclass_hash(nc("spec:\n  metadataOptions: {httpTokens: required, httpPutResponseHopLimit: 1}\n"))
    assert ec2nodeclass_hash(nc()) != ec2nodeclass_hash(nc("spec:\n  metadataOptions: {httpPutResponseHopLimit: 2}\n"))


def test_loaded_object_hash_equals_raw_hash():
    loaded = load_text(manifest_text("NodePool", RICH_NP)).objects[0]
    assert nodepool_hash(loaded) == nodepool_hash(manifest("NodePool", RICH_NP))


def test_hash_does_not_modify_input():
    doc = manifest("NodePool", RICH_NP)
    before = copy.deepcopy(doc)
    nodepool_hash(doc)
    assert doc == before


NP_CHANGES = [
    ("label value", "spec:\n  template:\n    metadata:\n      labels: {team: b, tier: web}\n", True),
    ("new annotation", "spec:\n  template:\n    metadata:\n      annotations: {example.com/owner: me, x: y}\n", True),
    ("taint effect", "spec:\n  template:\n    spec:\n      taints: [{key: a, effect: PreferNoSchedule}, {key: b, value: x, effect: NoExecute}]\n", True),
    ("startup taint", "spec:\n  template:\n    spec:\n      startupTaints: []\n", True),
    ("nodeClassRef name", "spec:\n  template:\n    spec:\n      nodeClassRef: {name: other}\n", True),
    ("expireAfter", "spec:\n  template:\n    spec:\n      expireAfter: Never\n", True),
    ("terminationGracePeriod", "spec:\n  template:\n    spec:\n      terminationGracePeriod: 1h\n", True),
    ("requirements", "spec:\n  template:\n    spec:\n      requirements: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]\n", False),
    ("weight", "spec:\n  weight: 10\n", False),
    ("limits", "spec:\n  limits: {cpu: '10'}\n", False),
    ("disruption", "spec:\n  disruption: {consolidateAfter: 5m, consolidationPolicy: WhenEmpty, budgets: [{nodes: '0'}]}\n", False),
    ("object name", "metadata:\n  name: other\n", False),
    ("object labels", "metadata:\n  labels: {a: b}\n", False),
]


@pytest.mark.parametrize("what,patch,changes", NP_CHANGES, ids=[c[0] for c in NP_CHANGES])
def test_nodepool_fields_in_and_out(what, patch, changes):
    base = manifest("NodePool", RICH_NP)
    changed = hashes.nodepool_hash(_merge(base, patch))
    assert (changed != nodepool_hash(base)) is changes


NC_CHANGES = [
    ("tags", "spec:\n  tags: {team: b, env: prod}\n", True),
    ("userData", "spec:\n  userData: 'echo hi'\n", True),
    ("role", "spec:\n  role: OtherRole\n", True),
    ("volume size", "spec:\n  blockDeviceMappings: [{deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 30Gi, volumeType: gp3}}, {deviceName: /dev/xvdb, ebs: {volumeSize: 100Gi, volumeType: gp3}}]\n", True),
    ("kubelet", "spec:\n  kubelet: {maxPods: 60, systemReserved: {cpu: 100m, memory: 100Mi}}\n", True),
    ("metadataOptions", "spec:\n  metadataOptions: {httpTokens: optional}\n", True),
    ("detailedMonitoring", "spec:\n  detailedMonitoring: true\n", True),
    ("alias family change", "spec:\n  amiSelectorTerms: [{alias: bottlerocket@latest}]\n", True),
    ("amiFamily Custom", "spec:\n  amiFamily: Custom\n", True),
    ("amiFamily equal to alias family", "spec:\n  amiFamily: AL2023\n", False),
    ("alias version", "spec:\n  amiSelectorTerms: [{alias: al2023@v20240625}]\n", False),
    ("subnets", "spec:\n  subnetSelectorTerms: [{id: subnet-123}]\n", False),
    ("security groups", "spec:\n  securityGroupSelectorTerms: [{name: my-sg}]\n", False),
    ("capacity reservations", "spec:\n  capacityReservationSelectorTerms: [{id: cr-123}]\n", False),
    ("detailedMonitoring false == unset", "spec:\n  detailedMonitoring: false\n", False),
    ("status", "status:\n  amis: [{id: ami-1}]\n", False),
]


@pytest.mark.parametrize("what,patch,changes", NC_CHANGES, ids=[c[0] for c in NC_CHANGES])
def test_ec2nodeclass_fields_in_and_out(what, patch, changes):
    base = manifest("EC2NodeClass", RICH_NC)
    assert (ec2nodeclass_hash(_merge(base, patch)) != ec2nodeclass_hash(base)) is changes


def test_hash_inputs_document_exclusions():
    inp = hashes.nodepool_hash_input(np(RICH_NP))
    assert "requirements" not in inp["spec"] and inp["spec"]["expireAfter"] == "720h"
    inp = hashes.ec2nodeclass_hash_input(nc(RICH_NC))
    assert inp["amiFamily"] == "AL2023"
    assert not set(hashes.EC2NODECLASS_HASH_EXCLUDED) & set(inp["spec"])


def _merge(base, patch_yaml):
    import yaml

    from .helpers import merge

    return merge(base, yaml.safe_load(patch_yaml))
