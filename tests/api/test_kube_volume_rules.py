"""api/kuberules_volumes.py and the claim-name cross-check (api/crosscheck.py): a pod spec's volumes and the
containers' mounts checked as the API server checks them, and a pod naming a PersistentVolumeClaim the load does not
have (a warning when the load has claims in that namespace)."""

from __future__ import annotations

import yaml

from karpenter_lambda.api.crosscheck import storage_reference_warnings
from karpenter_lambda.api.kuberules_objects import kube_errors

from manifests import workload

VOLUMES = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: app
      image: nginx
      volumeMounts:
        - {name: dat, mountPath: /data}
        - {name: cache, mountPath: /data}
        - {name: cache, mountPath: /cache, subPath: ../etc}
        - {name: cache, mountPath: /tmp/x, subPath: /abs}
        - {name: data}
      volumeDevices:
        - {name: cache, devicePath: /dev/xvdf}
        - {name: data}
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: ""}}
    - {name: cache, emptyDir: {}}
    - {name: cache, emptyDir: {}}
    - {name: Bad_Name, emptyDir: {}}
    - {name: none}
    - {name: two, emptyDir: {}, hostPath: {path: /x}}
"""


def _errors(text: str) -> list[str]:
    return [str(e) for e in kube_errors(yaml.safe_load(text), "1.31")]


def test_volume_and_mount_rules():
    # the schema's own "Required value"s come first (mountPath and devicePath are required there); a rule does not
    # repeat them
    assert _errors(VOLUMES) == [
        "spec.containers[0].volumeDevices[1].devicePath: Required value",
        "spec.containers[0].volumeMounts[4].mountPath: Required value",
        "spec.volumes[0].persistentVolumeClaim.claimName: Required value",
        'spec.volumes[2].name: Duplicate value: "cache"',
        'spec.volumes[3].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character",
        "spec.volumes[4]: Required value: must specify a volume type",
        "spec.volumes[5].hostPath: Forbidden: may not specify more than 1 volume type",
        'spec.containers[0].volumeMounts[0].name: Not found: "dat" (the pod\'s volumes: Bad_Name, cache, data, none, '
        "two) (did you mean data?)",
        'spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique',
        "spec.containers[0].volumeMounts[2].subPath: Invalid value: \"../etc\": must not contain '..'",
        'spec.containers[0].volumeMounts[3].subPath: Invalid value: "/abs": must be a relative path',
        'spec.containers[0].volumeDevices[0].name: Invalid value: "cache": can only use volume source type of '
        "PersistentVolumeClaim or Ephemeral for block mode",
    ]


def test_a_workload_template_is_checked_and_a_good_one_passes():
    def web(init_mount: str) -> dict:
        return workload("web", {"initContainers": [{"name": "init", "image": "busybox",
                                                    "volumeMounts": [{"name": init_mount, "mountPath": "/conf"}]}],
                                "containers": [{"name": "web", "image": "nginx", "volumeMounts": [
                                    {"name": "conf", "mountPath": "/etc/nginx", "subPath": "nginx"}]}],
                                "volumes": [{"name": "conf", "configMap": {"name": "web"}}]})

    assert kube_errors(web("conf"), "1.31") == []
    assert [str(e) for e in kube_errors(web("cnof"), "1.31")] == [
        'spec.template.spec.initContainers[0].volumeMounts[0].name: Not found: "cnof" (the pod\'s volumes: conf) '
        "(did you mean conf?)"]


def _stateful(claim: str) -> dict:
    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return workload("db", {"containers": [{"name": "db", "image": "postgres",
                                           "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"},
                                                            {"name": "run", "mountPath": "/run"}],
                                           "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvdb"}]}],
                           "volumes": [{"name": "run", "emptyDir": {}}]},
                    kind="StatefulSet", replicas=2, serviceName="db",
                    volumeClaimTemplates=[{"metadata": {"name": claim}, "spec": claim_spec},
                                          {"metadata": {"name": "raw"}, "spec": {**claim_spec, "volumeMode": "Block"}}])


def test_a_statefulset_mounts_its_claim_templates_and_a_typo_refuses_its_pods():
    assert kube_errors(_stateful("data"), "1.31") == []   # the controller gives each pod a volume per claim template
    assert [str(e) for e in kube_errors(_stateful("dta"), "1.31")] == [
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data" (the pod\'s volumes: dta, raw, run) '
        "(did you mean dta?) (the API server stores the StatefulSet but refuses each pod made from it: they would "
        "never start)"]


_CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
CLAIMS = [
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared-data"}, "spec": _CLAIM_SPEC},
    workload("app", {"containers": [{"name": "app", "image": "nginx"}],
                     "volumes": [{"name": v, "persistentVolumeClaim": {"claimName": c}} for v, c in
                                 (("a", "shared-date"), ("b", "shared-data"), ("c", "data-db-1"), ("d", "data-db-2"))]}),
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": "team-b"},
     "spec": {"containers": [{"name": "app", "image": "nginx"}],
              "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "in-the-cluster"}}]}},
    workload("db", {"containers": [{"name": "db", "image": "postgres"}]}, kind="StatefulSet", replicas=2,
             volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": _CLAIM_SPEC}]),
]


def test_a_claim_name_the_namespace_does_not_have_is_a_warning():
    docs = CLAIMS
    found = [(pos, e.path, e.message) for pos, e in storage_reference_warnings(docs)]
    # shared-date: a typo; data-db-2: the StatefulSet has 2 replicas (claims data-db-0, data-db-1); team-b has no
    # claims among the files, so its pod's claim may be in the cluster: no warning
    assert found == [
        (1, "spec.template.spec.volumes[0].persistentVolumeClaim.claimName",
         "no PersistentVolumeClaim shared-date among the objects given in namespace default (PersistentVolumeClaims: "
         "data-db-0, data-db-1, shared-data): its pods stay Pending (did you mean shared-data?)"),
        (1, "spec.template.spec.volumes[3].persistentVolumeClaim.claimName",
         "no PersistentVolumeClaim data-db-2 among the objects given in namespace default (PersistentVolumeClaims: "
         "data-db-0, data-db-1, shared-data): its pods stay Pending (did you mean data-db-0 or data-db-1?)"),
    ]
