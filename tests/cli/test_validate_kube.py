"""Issue 31: validate, plan and simulate refuse Kubernetes objects the API server would refuse (its OpenAPI schema,
strict, plus its rules the schema cannot say), the same object twice, and Scenario steps the NodePools cannot take;
each problem is one ``FILE:DOC: Kind/name: field: message (line N)`` error."""

from __future__ import annotations

import json

import manifests as shared
import pytest
import yaml

PAIR = shared.pair()
ON_DEMAND_PAIR = shared.pair(capacity_types=["on-demand"])

# The issue's workload: a misspelled anti-affinity and toleration, bad quantities, a PDB with both fields.
ISSUE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 7
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      afinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - topologyKey: kubernetes.io/hostname
              labelSelector: {matchLabels: {app: web}}
      toleration: [{key: dedicated, operator: Exists}]
      containers:
        - name: app
          image: nginx
          resources:
            requests:
              cpu: half
              memory: 12GB
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""

# Ten kinds of typo, one each: (field path, words of its message).
TEN_TYPOS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: three
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      afinity: {}
      toleration: []
      containers:
        - name: app
          image: nginx
          imagePullPolicy: Allways
          resources:
            requests:
              cpu: half
              memory: 12GB
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      tolerations:
        - {key: dedicated, operator: Exist, effect: NoSchedule}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotScheduled
          labelSelector:
            matchExpressions: [{key: app, operator: in, values: [api]}]
      containers: [{name: api, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""
TEN_FIELDS = [
    ("Deployment/web", "spec.replicas", "must be an integer"),
    ("Deployment/web", "spec.template.spec.afinity", 'unknown field "afinity" (did you mean "affinity"?)'),
    ("Deployment/web", "spec.template.spec.toleration", 'unknown field "toleration" (did you mean "tolerations"?)'),
    ("Deployment/web", "spec.template.spec.containers[0].imagePullPolicy", 'Unsupported value: "Allways"'),
    ("Deployment/web", "spec.template.spec.containers[0].resources.requests.cpu", '"half": must be a quantity'),
    ("Deployment/web", "spec.template.spec.containers[0].resources.requests.memory", "did you mean 12G or 12Gi?"),
    ("Deployment/api", "spec.template.spec.tolerations[0].operator", 'Unsupported value: "Exist"'),
    ("Deployment/api", "spec.template.spec.topologySpreadConstraints[0].whenUnsatisfiable", 'Unsupported value: "DoNotScheduled"'),
    ("Deployment/api", "spec.template.spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator", 'Unsupported value: "in"'),
    ("PodDisruptionBudget/web", "spec", "minAvailable and maxUnavailable cannot be both set"),
]


def _line(text: str, needle: str, start: int = 0) -> int:
    lines = text.splitlines()
    return next(i + 1 for i in range(start, len(lines)) if needle in lines[i])


def test_ten_kinds_of_typo_are_ten_errors_naming_each_field_and_line(cli, manifests):
    f = manifests("typos.yaml", TEN_TYPOS)
    rc, _, err = cli("validate", f)
    assert rc == 1
    errors = err.splitlines()[:-1]
    assert err.splitlines()[-1] == "invalid: 10 errors in 1 file (0 valid objects)"
    assert len(errors) == 10, err
    for (obj, path, words), line in zip(TEN_FIELDS, errors):
        assert line.startswith(f"{f}:"), line
        assert f": {obj}: {path}: " in line and words in line, (path, line)
    # each names the line of its field
    assert errors[0].endswith(f"(line {_line(TEN_TYPOS, 'replicas: three')})")
    assert errors[1].endswith(f"(line {_line(TEN_TYPOS, 'afinity:')})")
    assert errors[6].endswith(f"(line {_line(TEN_TYPOS, 'operator: Exist,')})")
    rc, out, _ = cli("validate", "--json", f)
    doc = json.loads(out)
    assert rc == 1 and len(doc["errors"]) == 10
    assert [e["path"] for e in doc["errors"]] == [p for _, p, _ in TEN_FIELDS]
    # plan and simulate refuse the same ten
    pools = manifests("pools.yaml", PAIR)
    for argv, code in ((("plan", "-f", pools, "-f", f), 1), (("simulate", pools, f, "--quiet"), 2)):
        rc, _, err = cli(*argv)
        named = [line for line in err.splitlines() if line.removeprefix("error: ").startswith(f"{f}:")]
        assert rc == code and len(named) == 10, err
        assert all(f": {obj}: {path}: " in line for (obj, path, _), line in zip(TEN_FIELDS, named))


def test_the_issue_workload_is_refused_by_validate_plan_and_simulate(cli, manifests):
    pools = manifests("pools.yaml", PAIR)
    f = manifests("web.yaml", ISSUE)
    rc, _, err = cli("validate", pools, f)
    assert rc == 1
    assert f"{f}:0: Deployment/web: spec.template.spec.afinity: unknown field \"afinity\"" in err
    assert f"{f}:1: PodDisruptionBudget/web: spec: Invalid value: minAvailable and maxUnavailable cannot be both set (line {_line(ISSUE, 'spec:', 25)})" in err
    assert err.splitlines()[-1] == "invalid: 5 errors in 1 file (2 valid objects)"
    # plan no longer drops the misspelled anti-affinity and packs the 7 pods on one node: it refuses, exit 1
    rc, out, err = cli("plan", "-f", pools, "-f", f)
    assert rc == 1 and out == ""
    assert "spec.template.spec.afinity: unknown field" in err and "minAvailable and maxUnavailable" in err
    rc, _, err = cli("simulate", pools, f, "--quiet")
    assert rc == 2
    assert "spec.template.spec.toleration: unknown field" in err and "12GB" in err


def test_kubernetes_version_decides_which_fields_exist(cli, manifests):
    """Pod-level ``resources`` came in Kubernetes 1.32: unknown in 1.31 (the default, the simulated cluster's)."""
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resources: {requests: {cpu: '1'}}\n"
           "  containers: [{name: c, image: busybox}]\n")
    f = manifests("pod.yaml", pod)
    rc, _, err = cli("validate", f)
    assert rc == 1 and f"{f}:0: Pod/p: spec.resources: unknown field \"resources\"" in err
    rc, out, _ = cli("validate", "--kubernetes-version", "1.32", f)
    assert (rc, out) == (0, "valid: 1 object in 1 file\n")
    rc, _, err = cli("validate", "--kubernetes-version", "1.2", f)
    assert rc == 2 and "--kubernetes-version: Kubernetes 1.2 is older than every schema known" in err


def test_an_old_api_version_of_a_builtin_kind_names_the_served_one(cli, manifests):
    f = manifests("old.yaml", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n")
    rc, _, err = cli("validate", f)
    assert rc == 1
    assert f'{f}:0: Deployment/d: apiVersion: Unsupported value: "extensions/v1beta1": Kubernetes 1.31 serves Deployment as apps/v1' in err


V1BETA1_POOL = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
"""


def test_a_v1beta1_and_a_v1_nodepool_of_one_name_are_one_duplicate_error(cli, manifests):
    v1 = manifests("a-v1.yaml", PAIR)
    old = manifests("b-v1beta1.yaml", V1BETA1_POOL)
    expected = f"{old}:0: NodePool/default: duplicate of {v1}:0 (line 1)"
    rc, _, err = cli("validate", v1, old)
    assert rc == 1
    assert [line for line in err.splitlines() if "warning" not in line] == [expected, "invalid: 1 error in 1 file (2 valid objects)"]
    rc, _, err = cli("plan", "-f", v1, "-f", old)
    assert rc == 1 and f"{old}:0: NodePool/default: duplicate of {v1}:0" in err
    rc, _, err = cli("simulate", v1, old, "--quiet")
    assert rc == 2 and f"{old}:0: NodePool/default: duplicate of {v1}:0" in err


def test_same_name_in_other_namespaces_is_not_a_duplicate_and_a_file_named_twice_is_read_once(cli, manifests, tmp_path):
    dep = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: NS}\nspec:\n"
           "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
           "    spec: {containers: [{name: c, image: nginx}]}\n")
    f = manifests("ns.yaml", dep.replace("NS", "a") + "---\n" + dep.replace("NS", "b"))
    rc, out, err = cli("validate", f, str(tmp_path))
    assert (rc, err) == (0, ""), err
    assert out == "valid: 2 objects in 1 file\n"
    twice = manifests("twice.yaml", dep.replace("NS", "a") + "---\n" + dep.replace("NS", "default").replace("namespace: default", "namespace: default"))
    rc, _, err = cli("validate", twice)
    assert rc == 0, err
    same = manifests("same.yaml", dep.replace("NS", "default") + "---\n" + dep.replace(", namespace: NS", ""))
    rc, _, err = cli("validate", same)
    assert rc == 1 and f"{same}:1: Deployment/web: duplicate of {same}:0" in err


def _scenario(*steps: str) -> str:
    body = "".join(f"    - {s}\n" for s in steps)
    return f"apiVersion: karpenter-lambda.io/v1alpha1\nkind: Scenario\nmetadata: {{name: s}}\nspec:\n  steps:\n{body}"


def test_a_spot_interruption_on_an_on_demand_only_nodepool_is_refused(cli, manifests):
    pools = manifests("pools.yaml", ON_DEMAND_PAIR)
    sc = manifests("scenario.yaml", _scenario("{at: 5m, interrupt: {kind: SpotInterruption, nodePool: default}}"))
    rc, _, err = cli("validate", pools, sc)
    assert rc == 1
    assert (f"{sc}:0: Scenario/s: spec.steps[0].interrupt.kind: step 0 (interrupt at 5m): SpotInterruption on NodePool "
            f"'default', whose requirements allow no spot capacity (karpenter.sh/capacity-type: on-demand): EC2 never "
            f"sends it to such nodes (line 6)") in err
    rc, _, err = cli("simulate", pools, sc, "--quiet")
    assert rc == 2 and "SpotInterruption on NodePool 'default'" in err
    # a NodePool that allows spot takes it
    spot = manifests("spot.yaml", PAIR)
    rc, _, err = cli("validate", spot, sc)
    assert rc == 0, err


def test_a_step_naming_a_nodepool_that_does_not_exist_is_refused(cli, manifests):
    pools = manifests("pools.yaml", PAIR)
    applied = shared.to_yaml(shared.nodepool("late"))
    import yaml

    late = json.dumps(yaml.safe_load(applied))
    sc = manifests("scenario.yaml", _scenario(
        "{at: 1m, nodeUnhealthy: {nodePool: defualt}}",
        f"{{at: 2m, apply: {late}}}",
        "{at: 3m, interrupt: {kind: ScheduledChange, nodePool: late}}",
        "{at: 4m, delete: {kind: NodePool, name: late}}",
        "{at: 5m, interrupt: {kind: StateChange, state: stopping, nodePool: late}}",
    ))
    rc, _, err = cli("validate", pools, sc)
    assert rc == 1
    lines = err.splitlines()
    assert lines[0] == (f"{sc}:0: Scenario/s: spec.steps[0].nodeUnhealthy.nodePool: step 0 (nodeUnhealthy at 1m): NodePool "
                        f"'defualt' does not exist at this step (NodePools: default) (line 6)")
    assert lines[1].startswith(f"{sc}:0: Scenario/s: spec.steps[4].interrupt.nodePool: step 4 (interrupt at 5m): NodePool 'late' does not exist")
    assert lines[2] == "invalid: 2 errors in 1 file (3 valid objects)"
    rc, _, err = cli("plan", "-f", pools, "-f", sc)
    assert rc == 1 and "NodePool 'defualt' does not exist" in err


def test_a_negative_nodepool_limit_is_refused(cli, manifests):
    f = manifests("pools.yaml", PAIR.replace("cpu: '1000'", "cpu: '-4'"))
    assert "cpu: '-4'" in open(f).read()
    rc, _, err = cli("validate", f)
    assert rc == 1 and f"{f}:0: NodePool/default: spec.limits[cpu]: '-4' must not be negative (line 18)" in err


@pytest.mark.parametrize("text", [ISSUE.split("---\n")[1]])
def test_plan_refuses_what_validate_refuses(cli, manifests, text):
    pools = manifests("pools.yaml", PAIR)
    f = manifests("pdb.yaml", text)
    v_rc, _, v_err = cli("validate", pools, f)
    p_rc, _, p_err = cli("plan", "-f", pools, "-f", f)
    assert v_rc == p_rc == 1
    assert "minAvailable and maxUnavailable cannot be both set" in v_err and "minAvailable and maxUnavailable cannot be both set" in p_err


APPLY_SCENARIO = """\
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  steps:
    - at: 5m
      apply:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: late}
        spec:
          selector: {matchLabels: {app: late}}
          template:
            metadata: {labels: {app: late}}
            spec:
              afinity: {}
              containers: [{name: c, image: nginx}]
    - at: 6m
      apply:
        apiVersion: karpenter.sh/v1
        kind: NodePool
        metadata: {name: extra}
        spec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}, weight: 0}
"""


def test_manifests_of_apply_steps_are_checked_before_the_run(cli, manifests):
    pools = manifests("pools.yaml", PAIR)
    sc = manifests("scenario.yaml", APPLY_SCENARIO)
    rc, _, err = cli("validate", pools, sc)
    assert rc == 1
    assert err.splitlines()[:2] == [
        f'{sc}:0: Scenario/s: spec.steps[0].apply.spec.template.spec.afinity: unknown field "afinity" (did you mean "affinity"?) (line 16)',
        f"{sc}:0: Scenario/s: spec.steps[1].apply.spec.weight: 0 is out of range: must be between 1 and 100 (line 23)"]
    rc, _, err = cli("simulate", pools, sc, "--quiet")
    assert rc == 2 and "spec.steps[0].apply.spec.template.spec.afinity" in err


LABEL_TYPOS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/arch: amd46}
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zon, whenUnsatisfiable: DoNotSchedule,
           labelSelector: {matchLabels: {app: web}}}
      containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]
"""


def test_a_label_no_node_has_is_a_warning_naming_the_line_and_the_fix(cli, manifests):
    # valid Kubernetes, so not an error: the pods would wait forever (amd46) or spread over nothing (zon)
    f = manifests("web.yaml", LABEL_TYPOS)
    rc, out, err = cli("validate", f)
    assert rc == 0 and out.strip() == "valid: 1 object in 1 file"
    assert err.splitlines() == [
        f"{f}:0: Deployment/web: warning: no node has kubernetes.io/arch=amd46: its values on AWS nodes are amd64, "
        f"arm64 (did you mean amd64?) (line {_line(LABEL_TYPOS, 'amd46')})",
        f"{f}:0: Deployment/web: warning: no node karpenter-lambda launches has the label topology.kubernetes.io/zon "
        f"(did you mean topology.kubernetes.io/zone?) (line {_line(LABEL_TYPOS, 'zon,')})",
    ]
    rc, out, _ = cli("validate", "--json", f)
    doc = json.loads(out)
    assert rc == 0 and doc["valid"] and doc["errors"] == []
    assert [w["path"] for w in doc["warnings"]] == ["spec.template.spec.nodeSelector[kubernetes.io/arch]",
                                                     "spec.template.spec.topologySpreadConstraints[0].topologyKey"]


MISSING_CLASS = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {storageClassName: gp33, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
"""


def test_a_claim_of_a_class_not_given_is_a_warning_and_a_bad_template_an_error(cli, manifests):
    f = manifests("db.yaml", MISSING_CLASS)
    rc, out, err = cli("validate", f)
    assert rc == 0 and out.strip() == "valid: 2 objects in 1 file"
    assert err.splitlines() == [
        f"{f}:1: StatefulSet/db: warning: no StorageClass gp33 among the objects given (StorageClasses: gp3): its "
        f"claims stay Pending (did you mean gp3?) (line {_line(MISSING_CLASS, 'gp33')})"]
    bad = manifests("bad.yaml", MISSING_CLASS.replace("gp33", "gp3").replace("10Gi", "10GB"))
    rc, _, err = cli("validate", bad)
    assert rc == 1
    assert (f"{bad}:1: StatefulSet/db: spec.volumeClaimTemplates[0].spec.resources.requests.storage: Invalid value: "
            '"10GB"') in err and "the StatefulSet's pods would never start" in err


def test_an_alias_version_no_release_has_is_a_warning(cli, manifests):
    text = shared.pair().replace("al2023@latest", "al2023@latst")
    assert "al2023@latst" in text
    f = manifests("pools.yaml", text)
    rc, _, err = cli("validate", f)
    assert rc == 0
    assert "EC2NodeClass/default: warning: version 'latst' of alias al2023@latst is neither latest" in err
    assert "(did you mean latest?)" in err


def test_plan_and_simulate_print_the_same_warnings(cli, manifests):
    pools = manifests("pools.yaml", PAIR)
    f = manifests("web.yaml", LABEL_TYPOS)
    warning = "Deployment/web: warning: no node has kubernetes.io/arch=amd46"
    rc, _, err = cli("plan", "-f", pools, "-f", f)
    assert rc == 3 and warning in err        # and the pods are unschedulable: no node has that architecture
    rc, _, err = cli("simulate", pools, f, "--until", "1m", "--quiet")
    assert warning in err


def test_claims_in_zones_no_node_shares_are_a_warning_and_plan_names_them(cli, manifests):
    docs = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two", "namespace": "default"},
         "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
                  "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "a"}},
                              {"name": "b", "persistentVolumeClaim": {"claimName": "b"}}]}}]
    for name, zone in (("a", "us-east-1a"), ("b", "us-east-1b")):
        docs.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{name}"},
                     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                              "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
                              "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                  {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}}})
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                              "volumeName": f"pv-{name}", "storageClassName": ""}})
    f = manifests("two.yaml", yaml.safe_dump_all(docs))
    rc, out, err = cli("validate", f)
    assert rc == 0 and out.strip() == "valid: 5 objects in 1 file"
    assert (f"{f}:0: Pod/two: warning: its pods: PVC a (PV pv-a: us-east-1a) and PVC b (PV pv-b: us-east-1b) are in "
            f"zones no node shares: no node can mount them all, so the pod never schedules") in err
    pools = manifests("pools.yaml", shared.pair())
    rc, out, err = cli("plan", "-f", pools, "-f", f, "--json")
    assert rc == 3
    (u,) = json.loads(out)["unschedulable"]
    assert u["reason"].startswith("its own node requirements exclude each other: topology.kubernetes.io/zone In "
                                  "[us-east-1a] and topology.kubernetes.io/zone In [us-east-1b]")


TAINTED_POOL_AND_TYPOS = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    metadata: {labels: {accelerator: nvidia}}
    spec:
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      tolerations: [{key: nvidia.com/gpus, operator: Exists}]
      nodeSelector: {accelerator: nvidai}
      containers:
        - name: c
          image: pytorch
          volumeMounts: [{name: dat, mountPath: /data}]
      volumes: [{name: data, emptyDir: {}}]
"""


def test_workload_typos_against_the_nodepools_and_its_own_volumes(cli, manifests):
    # the mount of a volume the pod does not have is refused by the API server (an error; the object is dropped)
    f = manifests("train.yaml", TAINTED_POOL_AND_TYPOS)
    rc, _, err = cli("validate", f)
    assert rc == 1
    assert err.splitlines() == [
        f"{f}:1: Deployment/train: spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"dat\" (the "
        f"pod's volumes: data) (did you mean data?) (line {_line(TAINTED_POOL_AND_TYPOS, 'name: dat,')})",
        "invalid: 1 error in 1 file (1 valid object)"]
    # the toleration and the selector are valid Kubernetes no NodePool takes: warnings naming the fix
    text = TAINTED_POOL_AND_TYPOS.replace("name: dat,", "name: data,")
    f = manifests("train2.yaml", text)
    rc, out, err = cli("validate", f)
    assert rc == 0 and out.strip() == "valid: 2 objects in 1 file"
    assert err.splitlines() == [
        f"{f}:1: Deployment/train: warning: toleration key nvidia.com/gpus matches no taint of the NodePools given, so "
        "their taint nvidia.com/gpu=true:NoSchedule is not tolerated (did you mean nvidia.com/gpu?) "
        f"(line {_line(text, 'gpus')})",
        f"{f}:1: Deployment/train: warning: no NodePool given labels its nodes accelerator=nvidai: their values are "
        f"nvidia (did you mean nvidia?) (line {_line(text, 'nvidai')})",
    ]


def test_a_nodepool_requirement_value_no_node_has_is_a_warning(cli, manifests):
    # the CRD takes any value: m7 is no family, so the NodePool silently launches only c7g
    pool = manifests("pools.yaml", shared.pair(families=["m7", "c7g"]))
    rc, out, err = cli("validate", pool)
    assert rc == 0 and out.strip() == "valid: 2 objects in 1 file"
    assert "NodePool/default: warning: no instance type in karpenter-lambda's catalog has " \
           "karpenter.k8s.aws/instance-family=m7 (did you mean m7a or m7g or m7i?)" in err
    rc, _, err = cli("validate", manifests("ok.yaml", shared.pair(families=["m7g", "c7g"])))
    assert rc == 0 and "warning" not in err


def test_too_many_replicas_is_refused_by_validate_plan_and_simulate_naming_the_line(cli, manifests):
    # plan and simulate would otherwise build millions of pods (and look hung)
    text = LABEL_TYPOS.replace("kubernetes.io/arch: amd46", "kubernetes.io/arch: amd64").replace(
        "topology.kubernetes.io/zon,", "topology.kubernetes.io/zone,").replace("spec:\n", "spec:\n  replicas: 5000000\n", 1)
    f = manifests("web.yaml", text)
    pools = manifests("pools.yaml", PAIR)
    message = (f"{f}:0: Deployment/web: spec.replicas: 5,000,000 pods: plan and simulate expand at most 100,000 pods "
               f"per workload; lower it to plan or simulate this workload (line {_line(text, 'replicas: 5000000')})")
    rc, _, err = cli("validate", f)
    assert rc == 1 and message in err.splitlines()
    rc, _, err = cli("plan", "-f", pools, "-f", f)
    assert rc != 0 and message in err
    rc, _, err = cli("simulate", pools, f, "--until", "1m", "--quiet")
    assert rc != 0 and message in err


def test_an_instance_type_a_node_overlay_prices_is_no_unknown_type(cli, manifests):
    """A type the bundled price table lacks (a preview type) is usable once a NodeOverlay prices it
    (catalog.overlay.overlay_prices): a pod selecting it is not warned about when the files carry that overlay."""
    pod = manifests("pod.yaml", yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "r9g.large"},
                 "containers": [{"name": "c", "image": "x"}]}}))
    rc, _, err = cli("validate", pod)
    assert rc == 0 and "catalog has node.kubernetes.io/instance-type=r9g.large" in err
    overlay = manifests("overlay.yaml", yaml.safe_dump({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "preview"},
        "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                   "values": ["r9g.large"]}], "price": "0.1"}}))
    rc, _, err = cli("validate", pod, overlay)
    assert rc == 0 and "r9g.large" not in err, err
