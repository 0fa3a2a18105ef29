"""v1beta1 NodePools / EC2NodeClasses are converted to v1 where manifests are loaded (api/convert.py via
api/manifests.py): one warning per object naming what changed; what cannot be converted is an error naming the field."""

import textwrap

import pytest

from karpenter_lambda.api.convert import convert_documents
from karpenter_lambda.api.manifests import load_files, load_text

# A NodePool as Karpenter's v0.3x docs write it (v1beta1), with its EC2NodeClass.
DOCS_NODEPOOL = textwrap.dedent("""\
    # from Karpenter's v0.3x docs
    apiVersion: karpenter.sh/v1beta1
    kind: NodePool
    metadata:
      name: default
    spec:
      template:
        spec:
          requirements:
            - key: karpenter.k8s.aws/instance-category
              operator: In
              values: ["c", "m", "r"]
            - key: karpenter.k8s.aws/instance-family
              operator: In
              values: ["m5", "m5d", "c5", "c5d", "c4", "r4"]
            - key: karpenter.k8s.aws/instance-size
              operator: NotIn
              values: ["nano", "micro", "small", "medium"]
            - key: topology.kubernetes.io/zone
              operator: In
              values: ["us-east-1a", "us-east-1b"]
            - key: kubernetes.io/arch
              operator: In
              values: ["amd64"]
          nodeClassRef:
            apiVersion: karpenter.k8s.aws/v1beta1
            kind: EC2NodeClass
            name: default
      limits:
        cpu: 100
      disruption:
        consolidationPolicy: WhenUnderutilized
        expireAfter: 720h
    """)

DOCS_NODECLASS = textwrap.dedent("""\
    apiVersion: karpenter.k8s.aws/v1beta1
    kind: EC2NodeClass
    metadata:
      name: default
    spec:
      amiFamily: AL2023
      role: "KarpenterNodeRole-demo"
      subnetSelectorTerms:
        - tags:
            karpenter.sh/discovery: "demo"
      securityGroupSelectorTerms:
        - tags:
            karpenter.sh/discovery: "demo"
    """)

KUBELET = "kubelet:\n  maxPods: 110\n  systemReserved:\n    cpu: 100m\n"


def _kubelet_block(kubelet: str) -> str:
    """The kubelet block indented under spec.template.spec."""
    return textwrap.indent(textwrap.dedent(kubelet), "      ")


def test_docs_nodepool_loads_as_v1_with_one_warning_each():
    r = load_text(DOCS_NODEPOOL + "---\n" + DOCS_NODECLASS, "np.yaml")
    assert r.issues == []
    assert [(o.kind, o.api_version) for o in r.objects] == [("NodePool", "karpenter.sh/v1"), ("EC2NodeClass", "karpenter.k8s.aws/v1")]
    np_, nc = r.objects
    d = np_.to_dict()["spec"]
    assert d["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert d["disruption"]["consolidateAfter"] == "0s"
    assert "expireAfter" not in d["disruption"]
    assert d["template"]["spec"]["expireAfter"] == "720h"
    assert d["template"]["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert d["limits"] == {"cpu": 100}
    ncs = nc.to_dict()["spec"]
    assert ncs["amiSelectorTerms"] == [{"alias": "al2023@latest"}] and "amiFamily" not in ncs
    assert ncs["metadataOptions"]["httpPutResponseHopLimit"] == 2
    assert len(r.warnings) == 2
    w_np, w_nc = r.warnings
    assert (w_np.file, w_np.doc_index, w_np.kind, w_np.name, w_np.line) == ("np.yaml", 0, "NodePool", "default", 2)
    for text in ("converted from karpenter.sh/v1beta1", "WhenUnderutilized -> WhenEmptyOrUnderutilized",
                 "spec.disruption.expireAfter -> spec.template.spec.expireAfter", "{apiVersion, kind, name} -> {group, kind, name}"):
        assert text in w_np.message
    assert (w_nc.kind, w_nc.doc_index) == ("EC2NodeClass", 1)
    assert "amiFamily AL2023 -> spec.amiSelectorTerms [{alias: al2023@latest}]" in w_nc.message


def test_v1_input_has_no_warning():
    r = load_files(["examples/default.yaml"])
    assert r.ok and r.warnings == []


def test_kubelet_moves_to_the_ec2nodeclass_in_the_same_input():
    np_text = DOCS_NODEPOOL.replace("      nodeClassRef:", _kubelet_block(KUBELET) + "      nodeClassRef:")
    r = load_text(np_text + "---\n" + DOCS_NODECLASS)
    assert r.issues == [], [str(i) for i in r.issues]
    np_, nc = r.objects
    assert "kubelet" not in np_.to_dict()["spec"]["template"]["spec"]
    assert nc.to_dict()["spec"]["kubelet"]["maxPods"] == 110
    assert nc.to_dict()["spec"]["kubelet"]["systemReserved"] == {"cpu": "100m"}
    assert "spec.template.spec.kubelet -> EC2NodeClass 'default' spec.kubelet" in r.warnings[0].message
    assert "spec.kubelet from NodePool 'default'" in r.warnings[1].message


def test_kubelet_without_its_ec2nodeclass_is_an_error_naming_the_field():
    np_text = DOCS_NODEPOOL.replace("      nodeClassRef:", _kubelet_block(KUBELET) + "      nodeClassRef:")
    r = load_text(np_text, "np.yaml")
    assert [(i.kind, i.name, i.path) for i in r.issues] == [("NodePool", "default", "spec.template.spec.kubelet")]
    assert "cannot be converted alone" in r.issues[0].message and "'default'" in r.issues[0].message
    assert r.issues[0].line == np_text.splitlines().index("      kubelet:") + 1  # the field's own line
    assert r.objects == []


def test_kubelet_reaches_the_ec2nodeclass_in_another_file(tmp_path):
    np_text = DOCS_NODEPOOL.replace("      nodeClassRef:", _kubelet_block(KUBELET) + "      nodeClassRef:")
    (tmp_path / "a-nodepool.yaml").write_text(np_text)
    (tmp_path / "b-nodeclass.yaml").write_text(DOCS_NODECLASS)
    r = load_files([tmp_path])
    assert r.ok, [str(i) for i in r.issues]
    assert {o.kind: o for o in r.objects}["EC2NodeClass"].to_dict()["spec"]["kubelet"]["maxPods"] == 110
    assert [(f.rsplit("/", 1)[-1], i) for f, i in r.origins] == [("a-nodepool.yaml", 0), ("b-nodeclass.yaml", 0)]


def test_two_nodepools_with_different_kubelets_on_one_ec2nodeclass_is_an_error():
    a = DOCS_NODEPOOL.replace("      nodeClassRef:", _kubelet_block(KUBELET) + "      nodeClassRef:")
    b = a.replace("name: default\nspec:", "name: other\nspec:", 1).replace("maxPods: 110", "maxPods: 50")
    r = load_text(a + "---\n" + b + "---\n" + DOCS_NODECLASS)
    assert [(i.name, i.path) for i in r.issues] == [("other", "spec.template.spec.kubelet")]
    assert "NodePool 'default''s kubelet" in r.issues[0].message
    # the same kubelet twice is fine
    same = a.replace("name: default\nspec:", "name: other\nspec:", 1)
    assert load_text(a + "---\n" + same + "---\n" + DOCS_NODECLASS).ok


@pytest.mark.parametrize("family", ["Custom", "Ubuntu"])
def test_amifamily_without_an_alias_and_no_terms_is_an_error(family):
    r = load_text(DOCS_NODECLASS.replace("AL2023", family))
    assert [(i.kind, i.path) for i in r.issues] == [("EC2NodeClass", "spec.amiFamily")]
    assert "no v1 amiSelectorTerms alias" in r.issues[0].message and "give spec.amiSelectorTerms" in r.issues[0].message
    assert r.issues[0].line == 6


def test_no_amifamily_means_al2_and_terms_keep_the_family():
    r = load_text(DOCS_NODECLASS.replace("  amiFamily: AL2023\n", ""))
    assert r.ok and r.objects[0].to_dict()["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]
    terms = "  amiSelectorTerms:\n    - id: ami-0123456789abcdef0\n"
    r = load_text(DOCS_NODECLASS.replace("  amiFamily: AL2023\n", terms))
    assert r.ok, [str(i) for i in r.issues]
    spec = r.objects[0].to_dict()["spec"]
    assert spec["amiFamily"] == "AL2" and spec["amiSelectorTerms"] == [{"id": "ami-0123456789abcdef0"}]
    assert "spec.amiFamily set to AL2" in r.warnings[0].message
    r = load_text(DOCS_NODECLASS.replace("  amiFamily: AL2023\n", "  amiFamily: Bottlerocket\n" + terms))
    assert r.ok and r.objects[0].to_dict()["spec"]["amiFamily"] == "Bottlerocket"


def test_consolidate_after_is_kept_with_when_underutilized_and_when_empty():
    under = DOCS_NODEPOOL.replace("    expireAfter: 720h\n", "    expireAfter: Never\n    consolidateAfter: 5m\n")
    r = load_text(under)
    assert r.ok, [str(i) for i in r.issues]
    d = r.objects[0].to_dict()["spec"]
    assert d["disruption"] == {**d["disruption"], "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"}
    assert d["template"]["spec"]["expireAfter"] == "Never"
    empty = under.replace("WhenUnderutilized", "WhenEmpty")
    r = load_text(empty)
    assert r.ok and r.objects[0].to_dict()["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"


def test_convert_documents_is_pure_and_leaves_its_input_alone():
    import yaml

    docs = list(yaml.safe_load_all(DOCS_NODEPOOL + "---\n" + DOCS_NODECLASS))
    before = yaml.safe_dump_all(docs)
    conv = convert_documents(docs + [{"apiVersion": "v1", "kind": "ConfigMap"}])
    assert yaml.safe_dump_all(docs) == before
    assert conv.converted == {0, 1} and conv.errors == []
    assert conv.docs[2] == {"apiVersion": "v1", "kind": "ConfigMap"}
    # converting the output again changes nothing
    again = convert_documents(conv.docs)
    assert again.docs == conv.docs and again.warnings == [] and again.converted == set()


def test_cdk_nodepools_folder_takes_v1beta1(tmp_path):
    from infra.nodepools import load_node_pools

    (tmp_path / "pools.yaml").write_text(DOCS_NODEPOOL + "---\n" + DOCS_NODECLASS)
    objs = load_node_pools(tmp_path)
    assert sorted((o.kind, o.api_version) for o in objs) == [("EC2NodeClass", "karpenter.k8s.aws/v1"), ("NodePool", "karpenter.sh/v1")]


def test_other_versions_get_a_hint():
    r = load_text("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n---\n"
                  "apiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata: {name: c}\n---\n"
                  "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: EC2NodeClass\nmetadata: {name: n}\n", "old.yaml")
    assert [(i.kind, i.path, i.line) for i in r.issues] == [("Provisioner", "kind", 2), ("NodeClaim", "apiVersion", 5),
                                                          ("EC2NodeClass", "apiVersion", 9)]
    assert "v1alpha5 Provisioner became the v1beta1 NodePool" in r.issues[0].message
    assert "NodeClaims are made by the controller" in r.issues[1].message
    assert "expected karpenter.k8s.aws/v1; karpenter.sh/v1beta1 NodePools and karpenter.k8s.aws/v1beta1 EC2NodeClasses are converted" in r.issues[2].message


def test_a_v1beta1_object_invalid_in_v1_says_so():
    r = load_text(DOCS_NODEPOOL.replace("limits:\n    cpu: 100", "limits:\n    cpu: lots"))
    assert [i.path for i in r.issues] == ["spec.limits[cpu]"]
    assert r.issues[0].message.endswith("(in the v1 form converted from v1beta1)")
    assert r.issues[0].line == DOCS_NODEPOOL.splitlines().index("    cpu: 100") + 1
