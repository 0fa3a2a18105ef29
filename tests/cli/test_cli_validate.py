"""`validate`: exit codes, the issue format on stderr, the JSON report."""

import io
import json

import yaml

from cli_manifests import BAD_YAML, UNKNOWN_KIND, UNSUPPORTED_KIND, nodepool, pair


def test_valid_files_exit_0(cli, manifests):
    a = manifests("a.yaml", pair())
    b = manifests("b.yaml", nodepool("other", 20))
    rc, out, err = cli("validate", a, b)
    assert rc == 0
    assert out == "valid: 3 objects in 2 files\n"
    assert err == ""


def test_invalid_exit_1_every_issue_in_file_doc_kind_name_path_format(cli, manifests):
    f = manifests("bad.yaml", pair() + "---\n" + UNKNOWN_KIND)
    g = manifests("broken.yaml", BAD_YAML)
    rc, out, err = cli("validate", f, g)
    assert rc == 1
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"{f}:2: ConfigMapp/cm: kind: unsupported kind v1/ConfigMapp (did you mean ConfigMap?)")
    assert lines[1].startswith(f"{g}:0: ?/?: invalid YAML (line ")
    assert lines[-1] == "invalid: 2 errors in 2 files (2 valid objects)"
    assert len(lines) == 3


def test_missing_file_is_usage_error_2(cli, manifests):
    ok = manifests("ok.yaml", pair())
    rc, out, err = cli("validate", ok, "/nonexistent/x.yaml")
    assert rc == 2
    assert "/nonexistent/x.yaml: no such file or directory" in err


def test_no_arguments_is_usage_error_2(cli):
    rc, out, err = cli("validate")
    assert rc == 2
    assert "validate: no input: give manifest files or directories (FILE... or -f FILE)" in err


def test_files_may_also_be_given_with_f_as_for_plan_and_kubectl(cli, manifests):
    ok = manifests("ok.yaml", pair())
    bad = manifests("bad.yaml", UNKNOWN_KIND)
    rc, out, err = cli("validate", "-f", ok)
    assert rc == 0 and out.strip() == "valid: 2 objects in 1 file"
    rc, out, err = cli("validate", ok, "--filename", bad)
    assert rc == 1 and f"{bad}:0: ConfigMapp/cm: kind: unsupported kind v1/ConfigMapp" in err


def test_json_report(cli, manifests):
    f = manifests("mixed.yaml", pair() + "---\n" + UNKNOWN_KIND)
    rc, out, err = cli("validate", "--json", f)
    assert rc == 1
    doc = json.loads(out)
    assert doc["valid"] is False
    assert doc["objects"] == [{"kind": "EC2NodeClass", "name": "default", "file": f},
                              {"kind": "NodePool", "name": "default", "file": f}]
    assert len(doc["errors"]) == 1
    e = doc["errors"][0]
    assert (e["file"], e["docIndex"], e["kind"], e["name"], e["path"]) == (f, 2, "ConfigMapp", "cm", "kind")
    assert "unsupported kind" in e["message"]

    rc, out, _ = cli("validate", "--json", manifests("good.yaml", pair()))
    assert rc == 0 and json.loads(out)["valid"] is True and json.loads(out)["errors"] == []


def test_directory_and_stdin(cli, manifests, monkeypatch, tmp_path):
    manifests("1.yaml", pair())
    manifests("2.yml", nodepool("second", 5))
    (tmp_path / "notes.txt").write_text("not a manifest")
    rc, out, _ = cli("validate", str(tmp_path))
    assert (rc, out) == (0, "valid: 3 objects in 2 files\n")

    monkeypatch.setattr("sys.stdin", io.StringIO(UNKNOWN_KIND))
    rc, _, err = cli("validate", "-")
    assert rc == 1 and err.startswith("<stdin>:0: ConfigMapp/cm: kind: ")


def test_unknown_field_and_bad_values_are_reported_with_paths(cli, manifests):
    bad = nodepool(weight=500).replace("  weight: 500\n", "  weight: 500\n  disruption:\n    consolidationPolcy: WhenEmpty\n")
    f = manifests("typo.yaml", bad)
    rc, out, err = cli("validate", f)
    assert rc == 1
    lines = err.splitlines()
    assert any(l.startswith(f"{f}:0: NodePool/default: spec.disruption.consolidationPolcy: ") for l in lines)
    assert any(l.startswith(f"{f}:0: NodePool/default: spec.weight: ") for l in lines)
    assert lines[-1] == f"invalid: {len(lines) - 1} errors in 1 file (0 valid objects)"


KWOK_PAIR = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
      nodeClassRef:
        group: karpenter.kwok.sh
        kind: KWOKNodeClass
        name: default
---
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
"""


def test_another_providers_node_class_is_skipped_not_an_error(cli, manifests):
    """Karpenter's own kwok example pairs a NodePool with a KWOKNodeClass: the file validates (exit 0),
    the node class is noted on stderr and listed under "skipped"; a ConfigMap is still an error."""
    f = manifests("kwok.yaml", KWOK_PAIR)
    rc, out, err = cli("validate", f)
    assert rc == 0, err
    assert out == "valid: 1 object in 1 file (1 skipped: another provider's node class)\n"
    assert err.startswith(f"{f}:1: KWOKNodeClass/default: apiVersion: skipped: karpenter.kwok.sh/v1alpha1 KWOKNodeClass")
    rc, out, _ = cli("validate", "--json", f)
    doc = json.loads(out)
    assert rc == 0 and doc["valid"] is True and doc["errors"] == []
    assert [(s["kind"], s["docIndex"]) for s in doc["skipped"]] == [("KWOKNodeClass", 1)]
    assert doc["objects"] == [{"kind": "NodePool", "name": "default", "file": f}]

    rc, _, err = cli("validate", manifests("both.yaml", KWOK_PAIR + "---\n" + UNKNOWN_KIND))
    assert rc == 1 and "ConfigMapp/cm: kind: unsupported kind" in err
    # a look-alike in our own groups is not skipped
    rc, _, err = cli("validate", manifests("typo.yaml", KWOK_PAIR.replace("karpenter.kwok.sh/v1alpha1", "karpenter.k8s.aws/v1")))
    assert rc == 1 and "unsupported kind karpenter.k8s.aws/v1/KWOKNodeClass" in err


def test_kubernetes_io_labels_are_valid_and_an_ignored_ssm_parameter_is_a_warning(cli, manifests):
    """Karpenter v1.9+ leaves kubernetes.io / k8s.io label keys to the user (the audit's g_k8sio.yaml), and its CRD
    takes ssmParameter beside an alias, never reading it (g_aliasssm.yaml): exit 0, a warning for the parameter."""
    nodeclass, nodepool_doc = yaml.safe_load_all(pair())
    nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest", "ssmParameter": "/my/ami"}]
    template = nodepool_doc["spec"]["template"]
    template.setdefault("metadata", {}).setdefault("labels", {})["node-role.kubernetes.io/worker"] = ""
    template["spec"]["requirements"].append({"key": "example.k8s.io/team", "operator": "Exists"})
    rc, out, err = cli("validate", manifests("k8sio.yaml", yaml.safe_dump_all([nodeclass, nodepool_doc])))
    assert rc == 0, err
    assert out == "valid: 2 objects in 1 file\n"
    assert "EC2NodeClass/default: warning: ssmParameter /my/ami is never read: with the alias al2023@latest" in err
    assert "restricted" not in err
