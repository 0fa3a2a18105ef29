"""api/crosscheck.storage_reference_warnings: a claim naming a StorageClass or volume the load does not have, when it
has some of that kind, is a warning at the claim's field (simulate would leave its pods Pending)."""

from __future__ import annotations

import yaml

from karpenter_lambda.api.crosscheck import storage_reference_warnings

DOCS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bound}
spec: {storageClassName: gp3, volumeName: pv-b, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres}]
      volumes:
        - name: scratch
          ephemeral:
            volumeClaimTemplate:
              spec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {storageClassName: gp33, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
    - metadata: {name: logs}
      spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"""


def test_each_missing_class_or_volume_is_one_warning_at_its_claim():
    docs = list(yaml.safe_load_all(DOCS))
    found = [(pos, e.path, e.message) for pos, e in storage_reference_warnings(docs)]
    assert found == [
        (2, "spec.volumeName", "no PersistentVolume pv-b among the objects given (PersistentVolumes: pv-a): its claims "
                               "stay Pending (did you mean pv-a?)"),
        (3, "spec.volumeClaimTemplates[0].spec.storageClassName",
         "no StorageClass gp33 among the objects given (StorageClasses: gp3): its claims stay Pending (did you mean "
         "gp3?)"),
        (3, "spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.spec.storageClassName",
         "no StorageClass fast among the objects given (StorageClasses: gp3): its claims stay Pending"),
    ]


def test_nothing_to_check_against_is_no_warning():
    # no StorageClass and no PersistentVolume given: they may be in the cluster
    docs = [d for d in yaml.safe_load_all(DOCS) if d["kind"] not in ("StorageClass", "PersistentVolume")]
    assert storage_reference_warnings(docs) == []
    assert storage_reference_warnings([None, "text", {"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [1]}}]) == []


PDBS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, labels: {app: solo}}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {minAvailable: 1, selector: {matchLabels: {app: webb}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: front, namespace: shop}
spec: {maxUnavailable: 1, selector: {matchExpressions: [{key: tier, operator: In, values: [front]}]}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: solo}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: solo}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: elsewhere, namespace: batch}
spec: {maxUnavailable: 0, selector: {matchLabels: {app: nothing-here}}}
"""


def test_a_budget_selecting_none_of_the_workloads_given_is_a_warning():
    from karpenter_lambda.api.crosscheck import pdb_warnings

    docs = list(yaml.safe_load_all(PDBS))
    found = [(pos, e.path, e.message) for pos, e in pdb_warnings(docs)]
    # the typo (webb): front and solo select their pods; no workload is given in batch, nothing to check; solo's
    # budget (maxUnavailable 0) allows no eviction at all (tests/api/test_pdb_blocking.py)
    assert found[0] == (2, "spec.selector", "selects the pods of none of the workloads given in namespace shop "
                                            "(Deployment/web): it protects nothing")
    assert [(pos, path) for pos, path, _ in found[1:]] == [(4, "spec.maxUnavailable")]
