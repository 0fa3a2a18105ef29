"""validate (issue 23 item 5): takes everything simulate takes (workloads, Scenario, OffPeakSchedule, PDBs) and
checks it as simulate reads it; empty input is an error naming what was given; issues carry the real line."""

import io
import json
from pathlib import Path

import pytest

from cli_manifests import UNSUPPORTED_KIND, pair

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: nginx
          resources:
            requests: {cpu: 500m, memory: 1Gi}
"""

OTHERS = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 2
  template:
    spec:
      containers: [{name: j, image: busybox}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: agent}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers: [{name: s, image: busybox}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
"""


@pytest.mark.parametrize("files", [["examples/demo"], ["examples/offpeak"], ["examples/spread"],
                                   ["examples/scenarios/drift-replacement-first.yaml"],
                                   ["examples/demo/nodepools.yaml", "examples/demo/workloads.yaml",
                                    "examples/scenarios/scale-and-release.yaml"]], ids=lambda f: f[-1])
def test_every_simulate_example_validates(cli, files):
    """Each example as its comment says to simulate it (each folder defines its own EC2NodeClass "default": with
    examples/default.yaml too it would be there twice, an error)."""
    rc, out, err = cli("validate", *files)
    assert rc == 0, err
    assert out.startswith("valid: ") and err == ""


def test_workloads_and_pdbs_are_accepted(cli, manifests):
    f = manifests("all.yaml", pair() + "---\n" + DEPLOYMENT + "---\n" + OTHERS)
    rc, out, err = cli("validate", f)
    assert (rc, err) == (0, "")
    assert out == "valid: 8 objects in 1 file\n"
    rc, out, _ = cli("validate", "--json", f)
    assert [o["kind"] for o in json.loads(out)["objects"]] == [
        "EC2NodeClass", "NodePool", "Deployment", "StatefulSet", "Job", "DaemonSet", "Pod", "PodDisruptionBudget"]


def test_a_configmap_is_not_read_and_a_kind_nobody_knows_is_an_error_naming_what_is_accepted(cli, manifests):
    f = manifests("cm.yaml", UNSUPPORTED_KIND)
    rc, out, err = cli("validate", f)
    assert rc == 0 and err.startswith(f"{f}:0: ConfigMap/cm: warning: not read: v1 ConfigMap (a Kubernetes kind) is left out")
    g = manifests("typo.yaml", UNSUPPORTED_KIND.replace("kind: ConfigMap", "kind: ConfigMapp"))
    rc, _, err = cli("validate", g)
    assert rc == 1
    assert err.startswith(f"{g}:0: ConfigMapp/cm: kind: unsupported kind v1/ConfigMapp (did you mean ConfigMap?): ")
    assert "Deployment" in err and "Scenario" in err and "PodDisruptionBudget" in err


def test_workload_problems_simulate_would_refuse_are_errors_with_their_line(cli, manifests):
    bad = DEPLOYMENT.replace("replicas: 3", "replicas: -2")
    f = manifests("bad.yaml", pair() + "---\n" + bad)
    rc, _, err = cli("validate", f)
    assert rc == 1
    line = (pair() + "---\n" + bad).splitlines().index("  replicas: -2") + 1
    assert f"{f}:2: Deployment/web: spec.replicas: Invalid value: -2: must be greater than or equal to 0 (line {line})" in err.splitlines()
    nt = manifests("notemplate.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 1}\n")
    rc, _, err = cli("validate", nt)
    assert rc == 1 and f"{nt}:0: Deployment/x: spec.template: Required value" in err


def test_a_bad_scenario_is_an_error(cli, manifests):
    text = Path("examples/demo/scenario.yaml").read_text().replace("apiVersion: karpenter-lambda.io/v1alpha1", "apiVersion: karpenter-lambda.io/v9", 1)
    f = manifests("scenario.yaml", text)
    rc, _, err = cli("validate", f)
    assert rc == 1 and "Scenario/" in err and "apiVersion: must be karpenter-lambda.io/v1alpha1" in err
    # an invalid workload is not counted, nor listed, as a valid object
    bad = manifests("bad-scenario.yaml", pair() + "---\n" + DEPLOYMENT.replace("replicas: 3", "replicas: -2"))
    rc, _, err = cli("validate", bad)
    assert rc == 1 and err.strip().splitlines()[-1] == "invalid: 1 error in 1 file (2 valid objects)", err
    rc, out, _ = cli("validate", "--json", bad)
    assert rc == 1 and sorted(o["kind"] for o in json.loads(out)["objects"]) == ["EC2NodeClass", "NodePool"]


def test_empty_file_is_an_error_naming_it(cli, manifests):
    f = manifests("empty.yaml", "")
    rc, out, err = cli("validate", f)
    assert rc == 1 and out == ""
    assert f"no Kubernetes objects in {f} (empty file)" in err
    c = manifests("comments.yaml", "# nothing here\n---\n")
    rc, _, err = cli("validate", c, manifests("ok.yaml", pair()))
    assert rc == 1 and f"no Kubernetes objects in {c} (empty file)" in err


def test_empty_directory_is_an_error_naming_it(cli, tmp_path):
    d = tmp_path / "nothing"
    d.mkdir()
    (d / "README.txt").write_text("not a manifest")
    rc, _, err = cli("validate", str(d))
    assert rc == 1 and f"no manifests in directory {d} (no *.yaml, *.yml or *.json files)" in err
    rc, out, _ = cli("validate", "--json", str(d))
    assert rc == 1 and json.loads(out)["valid"] is False


def test_empty_stdin_is_an_error(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc, _, err = cli("validate", "-")
    assert rc == 1 and "no Kubernetes objects on stdin (empty input)" in err


def test_wrong_path_stays_a_usage_error_naming_it(cli):
    rc, _, err = cli("validate", "/nonexistent/dir/")
    assert rc == 2 and "/nonexistent/dir/: no such file or directory" in err


def test_issues_carry_the_document_and_field_line(cli, manifests):
    """FILE:DOC: stays the document index (a contract); the line is added: ` (line N)` on stderr, "line" in --json."""
    text = pair() + "---\n" + pair().split("---\n")[1].replace("name: default", "name: typo").replace("  weight: 10\n", "  weight: 10\n  wieght: 3\n")
    f = manifests("lines.yaml", text)
    rc, _, err = cli("validate", f)
    assert rc == 1
    line = text.splitlines().index("  wieght: 3") + 1
    assert f"{f}:2: NodePool/typo: spec.wieght: " in err and err.splitlines()[0].endswith(f"(line {line})")
    rc, out, _ = cli("validate", "--json", f)
    e = json.loads(out)["errors"][0]
    assert (e["docIndex"], e["line"], e["path"]) == (2, line, "spec.wieght")
    # a missing field: the line of its parent
    g = manifests("missing.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  template:\n    spec: {}\n")
    rc, out, _ = cli("validate", "--json", g)
    errors = json.loads(out)["errors"]
    assert errors and all(e["line"] >= 5 for e in errors), errors


def test_a_path_spelled_with_dot_slash_or_a_double_slash_is_the_file_it_names(cli, manifests, monkeypatch):
    """The loader names files as pathlib spells them ("./a.yaml" -> "a.yaml"); the empty-input check compared the
    argument as typed, so every "./file" was "no Kubernetes objects (empty file)" and plan refused it."""
    f = Path(manifests("ok.yaml", pair()))
    monkeypatch.chdir(f.parent)
    rc, out, err = cli("validate", "./ok.yaml")
    assert rc == 0 and "empty file" not in err, err
    rc, out, err = cli("validate", f"{f.parent}//ok.yaml")
    assert rc == 0 and "empty file" not in err, err
    empty = Path(manifests("empty.yaml", ""))
    rc, _, err = cli("validate", "./empty.yaml")
    assert rc == 1 and "no Kubernetes objects in ./empty.yaml (empty file)" in err
