"""Input defects of validate / plan / simulate found by the CLI audit: each command reads the same inputs the same way.

Every test runs the CLI in-process (``main()``); the one full ``simulate`` run is a one-pod cluster (a few seconds).
"""

from __future__ import annotations

import io
import json

import yaml

import manifests as shared
from cli_manifests import pair

POD = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
                      "spec": {"containers": [{"name": "c", "image": "nginx",
                                               "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
DEPLOYMENT = shared.to_yaml(shared.workload("web", {"containers": [{"name": "c", "image": "nginx", "resources": {
    "requests": {"cpu": "500m", "memory": "512Mi"}}}]}, replicas=2, namespace="default"))
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: b}\n"
TYPO_KIND = "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: web}\n"


def scenario(*steps: dict, **spec) -> str:
    return yaml.safe_dump({"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                           "spec": {**spec, "steps": list(steps)}}, sort_keys=False)


def _lines(err: str, start: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(start)]


# -- 1: nodeClassRef.group with a version ---------------------------------------------------------------------------
def test_plan_takes_a_node_class_ref_group_with_its_version_as_validate_and_simulate_do(cli, manifests):
    """Karpenter's windows-custom-userdata example writes ``group: karpenter.k8s.aws/v1``: validation accepts it, and
    plan used to refuse it as "not an EC2NodeClass"."""
    versioned = pair().replace("group: karpenter.k8s.aws\n", "group: karpenter.k8s.aws/v1\n")
    assert "karpenter.k8s.aws/v1\n" in versioned
    f = manifests("np.yaml", versioned + "---\n" + POD)
    assert cli("validate", f)[0] == 0
    rc, out, err = cli("plan", "--json", f)
    assert rc == 0, err
    plan = json.loads(out)
    assert [c["pods"] for c in plan["nodeClaims"]] == [["default/p1"]] and plan["unschedulable"] == []
    other = manifests("other.yaml", pair().replace("group: karpenter.k8s.aws\n", "group: karpenter.kwok.sh\n") + "---\n" + POD)
    rc, _, err = cli("plan", other)
    assert rc == 1 and "is not an EC2NodeClass" in err   # another group still is not


# -- 2: Scenario steps naming workloads ------------------------------------------------------------------------------
def test_a_step_naming_a_workload_that_does_not_exist_is_refused_by_validate_and_before_simulate_runs(cli, manifests):
    f = manifests("all.yaml", pair() + "---\n" + DEPLOYMENT + "---\n" + scenario(
        {"at": 5, "scale": {"kind": "Deployment", "namespace": "default", "name": "nosuch", "replicas": 3}},
        {"at": "1m", "scale": {"kind": "Deployment", "name": "wbe", "replicas": 3}},
        {"at": "2m", "scale": {"kind": "StatefulSet", "name": "web", "replicas": 3}},
        {"at": "3m", "scale": {"kind": "Deployment", "name": "web", "replicas": 3}}))
    rc, out, err = cli("validate", f)
    assert rc == 1
    first = (f"{f}:3: Scenario/s: spec.steps[0].scale.name: step 0 (scale at 5): Deployment default/nosuch does not "
             f"exist at this step (Deployments in default: web) (line ")
    assert _lines(err, f"{f}:3: Scenario/s: spec.steps[0]")[0].startswith(first)
    assert "Deployment default/wbe does not exist at this step (Deployments in default: web) (did you mean web?)" in err
    assert "StatefulSet default/web does not exist at this step (there is Deployment default/web)" in err
    assert "spec.steps[3]" not in err
    assert err.splitlines()[-1] == "invalid: 3 errors in 1 file (4 valid objects)"
    rc, out, err = cli("simulate", "--json", f)   # refused before the run, with validate's lines
    assert rc == 2 and out == ""
    assert _lines(err, f"{f}:3: Scenario/s: spec.steps[0]")[0].startswith(first)
    assert "nothing simulated" in err and "[simulate]" not in err


def test_steps_follow_what_earlier_steps_apply_and_delete(cli, manifests):
    applied = yaml.safe_load(DEPLOYMENT.replace("web", "api"))
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
                 "spec": {"selector": {"matchLabels": {"a": "b"}},
                          "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    steps = ({"at": "1m", "apply": applied},
             {"at": "2m", "scale": {"kind": "Deployment", "name": "api", "replicas": 1}},   # applied: fine
             {"at": "3m", "delete": {"kind": "Deployment", "name": "api"}},
             {"at": "4m", "scale": {"kind": "Deployment", "name": "api", "replicas": 2}},   # deleted since
             {"at": "5m", "delete": {"kind": "DaemonSet", "name": "node-agent"}},            # given: simulate cannot
             {"at": "6m", "apply": daemonset},                                              # not applicable
             {"at": "7m", "delete": {"kind": "EC2NodeClass", "name": "defualt"}})
    given_ds = yaml.safe_dump({**daemonset, "metadata": {"name": "node-agent"}})
    f = manifests("s.yaml", pair() + "---\n" + POD + "---\n" + given_ds + "---\n" + scenario(*steps))
    rc, _, err = cli("validate", f)
    assert rc == 1
    assert sorted(line.split(": ", 3)[2] for line in err.splitlines()[:-1]) == [
        "spec.steps[3].scale.name", "spec.steps[4].delete.name", "spec.steps[5].apply.kind", "spec.steps[6].delete.name"]
    assert "Deployment default/api does not exist at this step" in err
    assert "simulate cannot delete the DaemonSet default/node-agent given in the files (only a DaemonSet an earlier " \
           "apply step made)" in err
    assert "simulate applies only NodePool, EC2NodeClass, NodeOverlay, CronJob, Deployment, Job, Pod, ReplicaSet, StatefulSet in " \
           "a step, got 'DaemonSet'" in err
    assert "EC2NodeClass 'defualt' does not exist at this step (EC2NodeClasses: default) (did you mean default?)" in err
    # a Scenario on its own is checked against nothing (as for NodePools)
    alone = manifests("alone.yaml", scenario({"at": "1m", "scale": {"kind": "Deployment", "name": "x", "replicas": 1}}))
    assert cli("validate", alone)[0] == 0


# -- 3: kinds nothing reads, kinds nobody knows ------------------------------------------------------------------------
def test_a_builtin_kind_nothing_reads_is_a_warning_in_validate_and_plan(cli, manifests):
    f = manifests("cm.yaml", CONFIGMAP)
    ok = manifests("ok.yaml", pair() + "---\n" + POD)
    rc, out, err = cli("validate", ok, f)
    assert rc == 0
    assert err == (f"{f}:0: ConfigMap/cm: warning: not read: v1 ConfigMap (a Kubernetes kind) is left out: validate, "
                   f"plan and simulate do not use it (line 2)\n")
    assert out == "valid: 3 objects in 1 file (1 not read: ConfigMap/cm)\n"
    rc, out, _ = cli("validate", "--json", ok, f)
    doc = json.loads(out)
    assert rc == 0 and doc["valid"] and [(w["kind"], w["path"]) for w in doc["warnings"]] == [("ConfigMap", "kind")]
    rc, out, err = cli("plan", "--json", ok, f)
    assert rc == 0 and "plan: note: not read" in err and "ConfigMap/cm" in err
    # still checked as the API server checks it: a bad one is an error everywhere
    bad = manifests("bad.yaml", CONFIGMAP.replace("data:", "dta:"))
    assert cli("validate", ok, bad)[0] == 1
    assert cli("plan", ok, bad)[0] == 1


def test_a_kind_nobody_knows_is_an_error_with_the_same_line_in_validate_plan_and_simulate(cli, manifests):
    ok = manifests("ok.yaml", pair() + "---\n" + POD)
    f = manifests("typo.yaml", TYPO_KIND)
    head = f"{f}:0: Deploymnet/web: kind: unsupported kind apps/v1/Deploymnet (did you mean Deployment?): Kubernetes " \
           f"has no kind Deploymnet in API group apps"
    for command, code in (("validate", 1), ("plan", 1), ("simulate", 2)):
        rc, out, err = cli(command, ok, f)
        assert rc == code, (command, err)
        assert any(head in line for line in err.splitlines()), (command, err)
    # another project's custom resource is not known either (its schema and effect are not)
    crd = manifests("crd.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    rc, _, err = cli("plan", ok, crd)
    assert rc == 1 and f"{crd}:0: Gadget/g: kind: unsupported kind example.com/v1/Gadget: karpenter-lambda does not " \
                       f"know the kind Gadget of example.com" in err
    lower = manifests("lower.yaml", "apiVersion: v1\nkind: pod\nmetadata: {name: a}\n")
    assert "unsupported kind v1/pod (did you mean Pod?)" in cli("validate", lower)[2]


# -- 4: stdin for plan and simulate ------------------------------------------------------------------------------------
def test_plan_reads_stdin_as_dash_and_dash_f_dash(cli, manifests, monkeypatch):
    nodes = manifests("np.yaml", pair())
    for argv in (["plan", "--json", nodes, "-"], ["plan", "--json", "-f", nodes, "-f", "-"]):
        monkeypatch.setattr("sys.stdin", io.StringIO(POD))
        rc, out, err = cli(*argv)
        assert rc == 0, err
        assert [c["pods"] for c in json.loads(out)["nodeClaims"]] == [["default/p1"]]
    monkeypatch.setattr("sys.stdin", io.StringIO(TYPO_KIND))
    rc, _, err = cli("plan", nodes, "-")
    assert rc == 1 and "<stdin>:0: Deploymnet/web: kind: unsupported kind" in err
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc, _, err = cli("plan", nodes, "-")
    assert rc == 1 and "no Kubernetes objects on stdin (empty input)" in err


def test_simulate_reads_stdin_and_leaves_out_what_it_does_not_read(cli, manifests, monkeypatch):
    """One real run: the pod comes on stdin, the ConfigMap is a warning and never reaches the simulated cluster."""
    nodes = manifests("np.yaml", pair())
    cm = manifests("cm.yaml", CONFIGMAP)
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    rc, out, err = cli("simulate", "--quiet", "--json", "--until", "3m", nodes, "-f", cm, "-f", "-")
    assert rc == 0, err
    assert f"{cm}:0: ConfigMap/cm: warning: not read: v1 ConfigMap" in err
    result = json.loads(out)
    assert result["unschedulable"] == [] and [c["pods"] for c in result["nodeClaims"]] == [["default/p1"]]


# -- 5: duplicate keys; the same object on stdin and in a file -----------------------------------------------------------
def test_a_key_set_twice_is_an_error_naming_the_file_line_and_key(cli, manifests, monkeypatch):
    twice = POD.replace("spec:\n", "spec:\n  containers: [{name: c, image: x, resources: {requests: {cpu: 8}}}]\n")
    f = manifests("dup.yaml", twice)
    rc, out, err = cli("validate", f)
    assert rc == 1
    assert err.splitlines()[0] == (
        f'{f}:0: Pod/p1: spec.containers: duplicate field "containers" (first on line 6): the API server refuses it '
        f'(strict field validation); YAML would silently keep the last (line 7)')
    assert err.splitlines()[-1] == "invalid: 1 error in 1 file (0 valid objects)"
    assert cli("plan", manifests("np.yaml", pair()), f)[0] == 1
    # two documents joined without --- (cat a.yaml b.yaml)
    monkeypatch.setattr("sys.stdin", io.StringIO(shared.to_yaml(shared.nodeclass()) + POD))
    rc, _, err = cli("validate", "-")
    assert rc == 1
    assert '<stdin>:0: Pod/p1: apiVersion: duplicate field "apiVersion" (first on line 1) (two documents without a --- ' \
           'line between them?)' in err
    # keys a merge (<<) brings are overridden, not repeated
    merged = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, labels: &l {app: a}}\n"
              "  spec: {containers: [{name: c, image: x}]}\n- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: b\n"
              "    labels:\n      <<: *l\n      app: b\n  spec: {containers: [{name: c, image: x}]}\n")
    assert cli("validate", manifests("merge.yaml", merged))[0] == 0


def test_the_same_object_on_stdin_and_in_a_file_is_a_duplicate(cli, manifests, monkeypatch):
    f = manifests("pod.yaml", POD)
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    rc, _, err = cli("validate", "-", f)
    assert rc == 1 and f"{f}:0: Pod/p1: duplicate of <stdin>:0 (line 1)" in err
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    rc, _, err = cli("validate", f, "-")
    assert rc == 1 and f"<stdin>:0: Pod/p1: duplicate of {f}:0 (line 1)" in err


# -- 6: a saved state of the wrong shape ---------------------------------------------------------------------------------
def _state_dir(tmp_path, state, kube, ec2):
    d = tmp_path / "st"
    d.mkdir(exist_ok=True)
    for name, doc in (("state.json", state), ("kube.json", kube), ("ec2.json", ec2)):
        (d / name).write_text(json.dumps(doc))
    return str(d)


def test_a_saved_state_of_the_wrong_shape_is_exit_2_naming_the_file(cli, tmp_path):
    good = {"cluster": "c", "region": "us-east-1"}
    cases = [({}, {}, {}, "state.json: 'cluster' missing"),
             ([], {}, {}, "state.json: expected an object"),
             (good, [], {}, "kube.json: expected an object {plural: [object, ...]}, got a list"),
             (good, {"pods": {}}, {}, "kube.json: 'pods' must be a list of objects, got an object"),
             (good, {"pods": [{"metadata": {}}]}, {}, "kube.json: pods[0] must be an object with metadata.name"),
             (good, {}, [], "ec2.json: expected an object"),
             ({**good, "items": {}}, {}, {}, "state.json: 'items' must be a list of DynamoDB items"),
             ({**good, "region": 7}, {}, {}, "state.json: 'region' must be a non-empty string, got a number"),
             ({**good, "items": [{"pk": {"Q": "x"}}]}, {}, {},
              'state.json: items[0].pk must be a DynamoDB-typed value such as {"S": "..."}'),
             ({**good, "k8sVersion": "x"}, {}, {}, "state.json: 'k8sVersion' must be a Kubernetes version such as 1.31")]
    for state, kube, ec2, message in cases:
        d = _state_dir(tmp_path, state, kube, ec2)
        rc, out, err = cli("--state", d, "disruption", "plan")
        assert rc == 2 and out == "", (message, err)
        assert err.startswith(f"karpenter-lambda: --state {d}: {message}") and "Traceback" not in err, (message, err)


def test_a_saved_entry_that_cannot_be_loaded_is_exit_2_naming_it(cli, tmp_path):
    d = _state_dir(tmp_path, {"cluster": "c", "region": "us-east-1", "items": [{"pk": {"S": 5}}]}, {}, {})
    rc, _, err = cli("--state", d, "get", "nodeclaims")
    assert rc == 2 and f"--state {d}: state.json: items[0] is not a DynamoDB item (ParamValidationError" in err


# -- 7: --until beyond the clock's dates ---------------------------------------------------------------------------------
def test_until_beyond_the_largest_value_is_exit_2_naming_it(cli, manifests):
    f = manifests("np.yaml", pair())
    rc, out, err = cli("simulate", "--until", "99999999h", f)
    assert (rc, out) == (2, "")
    assert err == ("karpenter-lambda simulate: --until: 99999999h is more than the largest value accepted, 876000h "
                   "(100 years) of virtual time\n")
    late = manifests("late.yaml", scenario({"at": "9999999h", "scale": {"kind": "Deployment", "name": "x", "replicas": 1}},
                                           startTime="9999-12-31T00:00:00Z"))
    rc, _, err = cli("validate", late)
    assert rc == 1
    assert "spec.startTime: 9999-12-31T00:00:00Z is too late: at most 9000-01-01T00:00:00Z" in err
    assert "spec.steps[0].at: 9999999h is more than the largest value accepted, 876000h (100 years)" in err


# -- 8: tracebacks ------------------------------------------------------------------------------------------------------
def test_malformed_documents_are_errors_not_tracebacks(cli, manifests):
    nometa = manifests("nometa.yaml", "apiVersion: karpenter-lambda.io/v1alpha1\nkind: Scenario\nmetadata:\nspec:\n  steps: []\n")
    for command, code in (("validate", 1), ("simulate", 2)):
        rc, _, err = cli(command, nometa)
        assert rc == code and f"{nometa}:0: Scenario/?: metadata: Invalid value: must be an object (with a name), got " \
                              f"null (line 3)" in err
    listed = manifests("list.yaml", pair().replace("apiVersion: karpenter.sh/v1\n", "apiVersion: [karpenter.sh/v1]\n"))
    for command in ("validate", "plan"):
        rc, _, err = cli(command, listed)
        assert rc == 1 and "NodePool/default: apiVersion: Invalid value: must be a string (such as apps/v1), got a " \
                           "list" in err


def test_an_empty_eviction_threshold_is_refused_before_plan_computes_allocatable(cli, manifests):
    nodeclass = shared.nodeclass()
    nodeclass["spec"]["kubelet"] = {"evictionHard": {"memory.available": ""}}
    text = shared.to_yaml(shared.nodepool(), nodeclass) + "---\n" + POD
    f = manifests("evict.yaml", text)
    for command in ("validate", "plan"):
        rc, _, err = cli(command, f)
        assert rc == 1 and "Traceback" not in err
        assert "EC2NodeClass/default: spec.kubelet.evictionHard[memory.available]: invalid eviction threshold '': must " \
               "be a percentage (e.g. 10%) or a quantity (e.g. 100Mi)" in err
    nodeclass["spec"]["kubelet"] = {"evictionSoft": {"memory.available": ""},
                                    "evictionSoftGracePeriod": {"memory.available": "1m"}}
    rc, _, err = cli("validate", manifests("soft.yaml", shared.to_yaml(shared.nodepool(), nodeclass)))
    assert rc == 1 and "spec.kubelet.evictionSoft[memory.available]: invalid eviction threshold ''" in err
    nodeclass["spec"]["kubelet"] = {"evictionHard": {"memory.available": "5%", "nodefs.available": "1Gi"}}
    assert cli("validate", manifests("ok.yaml", shared.to_yaml(shared.nodepool(), nodeclass)))[0] == 0


# -- 9: messages ----------------------------------------------------------------------------------------------------------
def test_a_bad_kubernetes_version_names_where_it_came_from(cli, manifests, monkeypatch):
    f = manifests("np.yaml", pair())
    monkeypatch.setenv("KARPENTER_LAMBDA_KUBERNETES_VERSION", "x")
    rc, _, err = cli("validate", f)
    assert rc == 2 and err.startswith("validate: environment variable KARPENTER_LAMBDA_KUBERNETES_VERSION: not a "
                                      "Kubernetes version: 'x'")
    rc, _, err = cli("plan", f)
    assert rc == 2 and "environment variable KARPENTER_LAMBDA_KUBERNETES_VERSION: not a Kubernetes version" in err
    rc, _, err = cli("validate", "--kubernetes-version", "y", f)   # the flag wins, and is named
    assert rc == 2 and err.startswith("validate: --kubernetes-version: not a Kubernetes version: 'y'")


def test_an_empty_directory_is_named_as_validate_names_it(cli, tmp_path):
    empty = tmp_path / "emptydir"
    empty.mkdir()
    said = f"no manifests in directory {empty} (no *.yaml, *.yml or *.json files)"
    for command, code in (("validate", 1), ("plan", 1), ("simulate", 2)):
        rc, _, err = cli(command, str(empty))
        assert rc == code and said in err and "no NodePool" not in err, (command, err)
