"""validate / convert / plan with Karpenter v1beta1 manifests: converted to v1 with one warning per object;
`convert` prints v1 YAML that re-validates with no warning."""

import json
import textwrap

import yaml

NODEPOOL_V1BETA1 = textwrap.dedent("""\
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
              values: ["m5", "c5", "r5"]
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
          kubelet:
            maxPods: 58
      limits:
        cpu: 100
      disruption:
        consolidationPolicy: WhenUnderutilized
        expireAfter: 720h
    """)

NODECLASS_V1BETA1 = textwrap.dedent("""\
    apiVersion: karpenter.k8s.aws/v1beta1
    kind: EC2NodeClass
    metadata:
      name: default
    spec:
      amiFamily: AL2
      role: KarpenterNodeRole-demo
      subnetSelectorTerms:
        - tags: {karpenter.sh/discovery: demo}
      securityGroupSelectorTerms:
        - tags: {karpenter.sh/discovery: demo}
    """)

PAIR = NODEPOOL_V1BETA1 + "---\n" + NODECLASS_V1BETA1


def test_validate_accepts_v1beta1_with_a_conversion_warning(cli, manifests):
    f = manifests("v1beta1.yaml", PAIR)
    rc, out, err = cli("validate", f)
    assert rc == 0, err
    assert out == "valid: 2 objects in 1 file (2 converted from v1beta1)\n"
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{f}:0: NodePool/default: warning: converted from karpenter.sh/v1beta1: ")
    assert "WhenUnderutilized -> WhenEmptyOrUnderutilized" in lines[0] and lines[0].endswith("(line 1)")
    assert lines[1].startswith(f"{f}:1: EC2NodeClass/default: warning: converted from karpenter.k8s.aws/v1beta1: ")
    assert "alias: al2@latest" in lines[1] and "spec.kubelet from NodePool 'default'" in lines[1]
    rc, out, _ = cli("validate", "--json", f)
    doc = json.loads(out)
    assert rc == 0 and doc["valid"] and doc["errors"] == []
    assert [(w["kind"], w["docIndex"], w["line"]) for w in doc["warnings"]] == [("NodePool", 0, 1), ("EC2NodeClass", 1, NODEPOOL_V1BETA1.count("\n") + 2)]


def test_convert_prints_v1_that_revalidates_without_warning(cli, manifests):
    f = manifests("v1beta1.yaml", PAIR)
    rc, out, err = cli("convert", "-f", f)
    assert rc == 0, err
    assert "warning: converted from karpenter.sh/v1beta1" in err
    docs = list(yaml.safe_load_all(out))
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [("karpenter.sh/v1", "NodePool"), ("karpenter.k8s.aws/v1", "EC2NodeClass")]
    assert docs[0]["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert docs[0]["spec"]["template"]["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert docs[1]["spec"]["kubelet"] == {"maxPods": 58}
    assert docs[1]["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]
    g = manifests("v1.yaml", out)
    rc, out2, err2 = cli("validate", g)
    assert (rc, out2, err2) == (0, "valid: 2 objects in 1 file\n", "")
    rc, again, err3 = cli("convert", g)  # v1 in, the same v1 out, no warning
    assert rc == 0 and err3 == "" and list(yaml.safe_load_all(again)) == docs


def test_convert_refuses_what_cannot_be_converted_alone(cli, manifests):
    f = manifests("np.yaml", NODEPOOL_V1BETA1)
    rc, out, err = cli("convert", "-f", f)
    assert rc == 1 and out == ""
    assert f"{f}:0: NodePool/default: spec.template.spec.kubelet: cannot be converted alone" in err
    assert f"(line {NODEPOOL_V1BETA1.splitlines().index('      kubelet:') + 1})" in err
    rc, _, err = cli("validate", f)
    assert rc == 1 and "spec.template.spec.kubelet: cannot be converted alone" in err
    # the EC2NodeClass given in another file is enough
    g = manifests("nc.yaml", NODECLASS_V1BETA1)
    rc, out, _ = cli("convert", "-f", f, "-f", g)
    assert rc == 0 and len(list(yaml.safe_load_all(out))) == 2


def test_convert_missing_file_is_usage_error(cli):
    rc, out, err = cli("convert", "-f", "/nonexistent/np.yaml")
    assert rc == 2 and out == "" and "/nonexistent/np.yaml: no such file or directory" in err


def test_plan_takes_v1beta1(cli, manifests):
    f = manifests("v1beta1.yaml", PAIR)
    rc, out, err = cli("plan", "-f", f, "-f", "examples/workloads/web.yaml", "--json")
    assert rc == 0, err
    assert f"{f}:0: NodePool/default: warning: converted from karpenter.sh/v1beta1" in err
    assert f"{f}:1: EC2NodeClass/default: warning: converted from karpenter.k8s.aws/v1beta1" in err
    plan = json.loads(out)
    assert plan["nodeClaims"] and all(c["nodePool"] == "default" for c in plan["nodeClaims"])
    assert all(c["instanceType"].split(".")[0] in ("m5", "c5", "r5") for c in plan["nodeClaims"])
    assert all(c["zone"] in ("us-east-1a", "us-east-1b") for c in plan["nodeClaims"])


def test_apply_stores_the_v1_objects(cli, manifests):
    from moto import mock_aws

    from karpenter_lambda.adapters.store import Store

    f = manifests("v1beta1.yaml", PAIR)
    with mock_aws():
        Store("default").ensure_table()
        rc, out, err = cli("apply", "-f", f)
        assert rc == 0, err
        assert out.splitlines() == ["ec2nodeclass/default created", "nodepool/default created"]
        assert err.count("warning: converted from") == 2
        rc, out, _ = cli("get", "ec2nodeclass", "default", "-o", "yaml")
        nc = yaml.safe_load(out)
        assert nc["apiVersion"] == "karpenter.k8s.aws/v1" and nc["spec"]["kubelet"] == {"maxPods": 58}
        rc, out, _ = cli("get", "nodepool", "default", "-o", "yaml")
        assert yaml.safe_load(out)["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_convert_reads_stdin_and_refuses_empty_input(cli, manifests, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(PAIR))
    rc, out, err = cli("convert", "-")
    assert rc == 0 and "<stdin>:0: NodePool/default: warning: converted from karpenter.sh/v1beta1" in err
    assert [d["apiVersion"] for d in yaml.safe_load_all(out)] == ["karpenter.sh/v1", "karpenter.k8s.aws/v1"]
    f = manifests("empty.yaml", "")
    rc, out, err = cli("convert", "-f", f)
    assert rc == 1 and out == "" and f"no Kubernetes objects in {f} (empty file)" in err
