"""Parity with Karpenter v1.14.1's CRDs (kubernetes-sigs/karpenter ``karpenter.sh_nodepools.yaml`` as the AWS provider
ships it, aws/karpenter-provider-aws ``karpenter.k8s.aws_ec2nodeclasses.yaml``): what the API server accepts validates
here, what it rejects is refused naming the field.

* label domains: since Karpenter v1.9 only ``karpenter.sh`` (but capacity-type / nodepool), ``karpenter.sh/nodepool``
  in a NodePool, ``kubernetes.io/hostname`` and ``karpenter.k8s.aws`` (but its well-known keys) are restricted;
  ``kubernetes.io`` and ``k8s.io`` keys are the user's (``node-role.kubernetes.io/worker``);
* ``karpenter.k8s.aws/nitro-sandbox`` is one exact well-known key (the provider's HEAD), not a prefix;
* taint ``value`` (the key pattern: at least one character), ``timeAdded`` (``format: date-time``);
* budget ``reasons`` is a set (``x-kubernetes-list-type: set``);
* ``volumeSize``'s pattern (no leading zero, Ti only 1-17, 20-27, 30-37, 40-47, 50-58);
* Gt/Lt/Gte/Lte values are CEL ``int()``s (int64); ``ipPrefixCount`` is ``format: int32``;
* ``ssmParameter`` beside ``alias`` or ``id`` is accepted (the CRD's exclusivity rules leave it out) and, as
  Karpenter resolves it, never read: the alias or the id wins (a ``validate`` warning says so).
"""

from __future__ import annotations

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.nodeclass_hints import nodeclass_hints
from karpenter_lambda.api.validation import validate_and_default

from .helpers import manifest
from .test_invalid_manifests import tmpl_spec

NP_REQ = "spec.template.spec.requirements"
TS = "spec.template.spec"
LABELS = "spec.template.metadata.labels"


def errors(kind: str, patch: str) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in validate_and_default(kind, manifest(kind, patch))[1]]


def messages_at(found: list[tuple[str, str]], path: str) -> list[str]:
    return [m for p, m in found if p == path]


def overlay_errors(*requirements: dict) -> list[tuple[str, str]]:
    doc = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
           "spec": {"requirements": list(requirements), "price": "1"}}
    return [(e.path, e.message) for e in validate_and_default("NodeOverlay", doc)[1]]


def np_labels(labels: dict) -> str:
    body = "\n".join(f"        {k!r}: {v!r}" for k, v in labels.items())
    return f"spec:\n  template:\n    metadata:\n      labels:\n{body}\n"


def np_reqs(*keys: str, operator: str = "Exists") -> str:
    body = "\n".join(f"        - {{key: {k!r}, operator: {operator}}}" for k in keys)
    return f"spec:\n  template:\n    spec:\n      requirements:\n{body}\n"


def nc_spec(body: str) -> str:
    indented = "\n".join("  " + line for line in body.strip("\n").splitlines())
    return f"spec:\n{indented}\n"


# ----------------------------------------------------------------------------- 1. label domains
USER_KEYS = ["node-role.kubernetes.io/worker", "kubernetes.io/role", "example.kubernetes.io/team",
             "example.k8s.io/team", "k8s.io/thing", "team.kops.k8s.io/x", "node.kubernetes.io/lifecycle",
             "topology.kubernetes.io/zone", "example.com/karpenter.sh"]


def test_kubernetes_io_and_k8s_io_labels_are_valid_in_template_labels():
    assert errors("NodePool", np_labels({k: "" for k in USER_KEYS if k != "topology.kubernetes.io/zone"})) == []


def test_kubernetes_io_and_k8s_io_keys_are_valid_in_requirements():
    assert errors("NodePool", np_reqs(*USER_KEYS)) == []
    assert errors("NodeClaim", "spec:\n  requirements:\n    - {key: node-role.kubernetes.io/worker, operator: Exists}\n"
                               "    - {key: karpenter.sh/nodepool, operator: In, values: [default]}\n") == []


def test_the_audit_reproduction_validates():
    """/tmp/audit_crd/g_k8sio.yaml: a kubernetes.io label and a k8s.io requirement key."""
    patch = """
spec:
  template:
    metadata:
      labels:
        node-role.kubernetes.io/worker: ''
    spec:
      requirements:
        - {key: example.k8s.io/team, operator: Exists}
"""
    assert errors("NodePool", patch) == []


RESTRICTED = [
    ("kubernetes.io/hostname", 'label "kubernetes.io/hostname" is restricted'),
    ("karpenter.sh/nodepool", 'label "karpenter.sh/nodepool" is restricted'),
    ("karpenter.sh/custom", 'label domain "karpenter.sh" is restricted'),
    ("team.karpenter.sh/custom", 'label domain "karpenter.sh" is restricted'),
    ("karpenter.sh", 'label domain "karpenter.sh" is restricted'),          # CEL: no '/' -> the whole key is the domain
    ("karpenter.k8s.aws/instance-colour", 'label domain "karpenter.k8s.aws" is restricted'),
    ("x.karpenter.k8s.aws/instance-family", 'label domain "karpenter.k8s.aws" is restricted'),
    ("karpenter.k8s.aws/nitro-sandbox-enabled", 'label domain "karpenter.k8s.aws" is restricted'),
    ("karpenter.k8s.aws/nitro-sandboxes", 'label domain "karpenter.k8s.aws" is restricted'),
]


@pytest.mark.parametrize("key,message", RESTRICTED, ids=[k for k, _ in RESTRICTED])
def test_restricted_keys_stay_refused_in_labels_and_requirements(key, message):
    found = errors("NodePool", np_labels({key: "x"}))
    assert any(message in m for m in messages_at(found, f"{LABELS}[{key}]")), found
    found = errors("NodePool", np_reqs(key))
    assert any(message in m for m in messages_at(found, f"{NP_REQ}[0].key")), found


def test_well_known_aws_and_karpenter_keys_stay_valid():
    keys = sorted(L.AWS_WELL_KNOWN) + [L.CAPACITY_TYPE, L.ARCH, L.OS, L.ZONE, L.INSTANCE_TYPE, L.WINDOWS_BUILD, L.ZONE_ID]
    assert errors("NodePool", np_reqs(*[k for k in keys if k != L.INSTANCE_TENANCY])) == []


# ----------------------------------------------------------------------------- 7. nitro-sandbox: one exact key
def test_nitro_sandbox_is_an_exact_key_not_a_prefix():
    assert errors("NodePool", np_labels({L.NITRO_SANDBOX: "true"})) == []
    assert errors("NodePool", np_reqs(L.NITRO_SANDBOX)) == []
    found = errors("NodePool", np_labels({"karpenter.k8s.aws/nitro-sandbox-foo": "x"}))   # /tmp/audit_crd/g_nitro.yaml
    assert messages_at(found, f"{LABELS}[karpenter.k8s.aws/nitro-sandbox-foo]")
    assert overlay_errors({"key": L.NITRO_SANDBOX, "operator": "Exists"}) == []
    found = overlay_errors({"key": "karpenter.k8s.aws/nitro-sandbox-foo", "operator": "Exists"})
    assert messages_at(found, "spec.requirements[0].key"), found


def test_scheduling_treats_an_unknown_nitro_sandbox_key_as_undefined():
    """``Requirements.compatible`` used to skip every key under the nitro-sandbox prefix; Karpenter's
    AllowUndefinedWellKnownLabels knows the exact key only."""
    from karpenter_lambda.scheduling.requirements import Requirements

    node = Requirements.from_list([{"key": L.ARCH, "operator": "In", "values": ["amd64"]}])
    exact = Requirements.from_list([{"key": L.NITRO_SANDBOX, "operator": "In", "values": ["true"]}])
    other = Requirements.from_list([{"key": "karpenter.k8s.aws/nitro-sandbox-foo", "operator": "In", "values": ["x"]}])
    assert node.compatible(exact) is None
    assert node.compatible(other) == "label karpenter.k8s.aws/nitro-sandbox-foo does not have known values"


# ----------------------------------------------------------------------------- 2. empty taint value
@pytest.mark.parametrize("field", ["taints", "startupTaints"])
def test_an_empty_taint_value_is_refused_with_omit_it(field):
    found = errors("NodePool", tmpl_spec(f"{field}:\n  - {{key: dedicated, value: '', effect: NoSchedule}}"))
    msgs = messages_at(found, f"{TS}.{field}[0].value")
    assert msgs and "omit" in msgs[0] and "value" in msgs[0], found
    found = errors("NodeClaim", f"spec:\n  {field}:\n    - {{key: dedicated, value: '', effect: NoSchedule}}\n")
    assert messages_at(found, f"spec.{field}[0].value"), found


def test_an_absent_taint_value_stays_valid():
    assert errors("NodePool", tmpl_spec("taints:\n  - {key: dedicated, effect: NoSchedule}\n"
                                        "startupTaints:\n  - {key: init, effect: NoExecute}\n"
                                        "  - {key: other, value: 'yes', effect: NoSchedule}")) == []


# ----------------------------------------------------------------------------- 3. timeAdded: date-time
# the API server's check (kube-openapi strfmt.IsDateTime) lower-cases the value before splitting it at "t"
@pytest.mark.parametrize("value", ["2024-05-01T10:00:00Z", "2024-05-01T10:00:00.123456+02:00", "2024-05-01t10:00:00z",
                                   "2024-02-29T23:59:59-07:00"])
def test_time_added_accepts_rfc3339(value):
    assert errors("NodePool", tmpl_spec(f"taints:\n  - {{key: a, effect: NoSchedule, timeAdded: '{value}'}}")) == []


@pytest.mark.parametrize("value", ["yesterday", "2024-05-01", "2024-05-01 10:00:00Z", "2024-02-30T10:00:00Z",
                                   "2024-05-01T24:00:00Z", "2024-05-01T10:00Z", "2024-05-01T10:00:00+0200", ""])
@pytest.mark.parametrize("field", ["taints", "startupTaints"])
def test_time_added_refuses_what_is_not_a_date_time(field, value):
    found = errors("NodePool", tmpl_spec(f"{field}:\n  - {{key: a, effect: NoSchedule, timeAdded: '{value}'}}"))
    msgs = messages_at(found, f"{TS}.{field}[0].timeAdded")
    assert msgs and "date-time" in msgs[0], found


# ----------------------------------------------------------------------------- 4. budget reasons are a set
def test_duplicate_budget_reasons_are_refused():
    patch = "spec:\n  disruption:\n    consolidateAfter: 0s\n    budgets:\n      - {nodes: '1', reasons: [Empty, Drifted, Empty]}\n"
    found = errors("NodePool", patch)
    assert found == [("spec.disruption.budgets[0].reasons[2]", 'Duplicate value: "Empty"')]
    ok = "spec:\n  disruption:\n    consolidateAfter: 0s\n    budgets:\n      - {nodes: '1', reasons: [Empty, Drifted]}\n"
    assert errors("NodePool", ok) == []


# ----------------------------------------------------------------------------- 5. volumeSize: the CRD pattern
def _volume(size: str) -> str:
    return nc_spec(f"blockDeviceMappings:\n  - {{deviceName: /dev/xvda, ebs: {{volumeSize: '{size}'}}}}")


@pytest.mark.parametrize("size", ["18Ti", "19Ti", "28Ti", "49Ti", "020Gi", "01T", "00020G", "0Ti"])
def test_volume_sizes_the_crd_pattern_refuses_are_refused(size):
    found = errors("EC2NodeClass", _volume(size))
    assert messages_at(found, "spec.blockDeviceMappings[0].ebs.volumeSize"), found


@pytest.mark.parametrize("size", ["1Gi", "20Gi", "59000Gi", "64000G", "17Ti", "20Ti", "57Ti", "58Ti", "9Ti", "64T", "60T"])
def test_volume_sizes_the_crd_pattern_accepts_are_valid(size):
    assert errors("EC2NodeClass", _volume(size)) == []


def test_18ti_is_refused_with_its_gi_spelling():
    [(_path, message)] = errors("EC2NodeClass", _volume("18Ti"))
    assert "18432Gi" in message


# ----------------------------------------------------------------------------- 6. Gt/Lt/Gte/Lte: int64
@pytest.mark.parametrize("op", ["Gt", "Lt", "Gte", "Lte"])
def test_numeric_operator_values_beyond_int64_are_refused(op):
    for value in ("99999999999999999999", str(2**63)):
        found = errors("NodePool", f"spec:\n  template:\n    spec:\n      requirements:\n"
                                   f"        - {{key: karpenter.k8s.aws/instance-cpu, operator: {op}, values: ['{value}']}}\n")
        msgs = messages_at(found, f"{NP_REQ}[0].values[0]")
        assert msgs and "9223372036854775807" in msgs[0], found
    assert errors("NodePool", f"spec:\n  template:\n    spec:\n      requirements:\n"
                              f"        - {{key: karpenter.k8s.aws/instance-cpu, operator: {op}, values: ['{2**63 - 1}']}}\n") == []


def test_node_overlay_numeric_values_beyond_int64_are_refused():
    found = overlay_errors({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["99999999999999999999"]})
    assert messages_at(found, "spec.requirements[0].values[0]"), found


# ----------------------------------------------------------------------------- 8. ipPrefixCount: int32
def test_ip_prefix_count_above_int32_is_refused():
    found = errors("EC2NodeClass", nc_spec("ipPrefixCount: 2147483648"))
    assert messages_at(found, "spec.ipPrefixCount") == ["2147483648 is out of range: must be between 0 and 2147483647"]
    assert errors("EC2NodeClass", nc_spec("ipPrefixCount: 2147483647")) == []


# ----------------------------------------------------------------------------- 9. ssmParameter beside alias / id
def test_ssm_parameter_with_alias_or_id_is_accepted_as_the_crd_does():
    assert errors("EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023@latest, ssmParameter: /my/param}")) == []
    assert errors("EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n  - {id: ami-0123, ssmParameter: /my/param}")) == []


def test_ssm_parameter_beside_alias_or_id_is_a_warning_that_it_is_never_read():
    doc = manifest("EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n"
                                           "  - {id: ami-0123, ssmParameter: /my/param}\n  - {ssmParameter: /other}"))
    found = [(e.path, e.message) for e in nodeclass_hints(doc)]
    assert [p for p, _ in found] == ["spec.amiSelectorTerms[0].ssmParameter"]
    assert "never read" in found[0][1] and "ami-0123" in found[0][1]
    doc = manifest("EC2NodeClass", nc_spec("amiSelectorTerms:\n  - {alias: al2023@latest, ssmParameter: /my/param}"))
    found = [(e.path, e.message) for e in nodeclass_hints(doc)]
    assert [p for p, _ in found] == ["spec.amiSelectorTerms[0].ssmParameter"]
    assert "al2023@latest" in found[0][1]


# (what the resolver does with such a term, against moto: tests/launch/test_resolver.py
# test_ssm_parameter_terms_as_upstream_describe_image_queries)


def test_name_tags_owner_beside_an_ssm_parameter_are_warned_as_not_applied():
    doc = manifest("EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n"
                                           "  - {ssmParameter: /my/ami, tags: {team: ml}, owner: self}\n"
                                           "  - {tags: {team: ml}}"))
    assert errors("EC2NodeClass", nc_spec("amiFamily: AL2023\namiSelectorTerms:\n"
                                          "  - {ssmParameter: /my/ami, tags: {team: ml}}")) == []   # valid (the CRD)
    found = [(e.path, e.message) for e in nodeclass_hints(doc)]
    assert [p for p, _ in found] == ["spec.amiSelectorTerms[0].tags", "spec.amiSelectorTerms[0].owner"]
    assert "selects the parameter's AMI alone" in found[0][1] and "/my/ami" in found[0][1]
