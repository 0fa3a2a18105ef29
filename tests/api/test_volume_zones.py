"""Workloads whose claims are in zones no node shares (api/volume_zones.py): one warning per workload naming its
first such pod, its claims and their zones; nothing where the zones meet or are not known from the load."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.volume_zones import volume_zone_warnings

A, B = "us-east-1a", "us-east-1b"


def pv(name: str, zone: str, key: str = "topology.kubernetes.io/zone") -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}]}}}}


def pvc(name: str, volume: str | None = None, klass: str = "gp3") -> dict:
    spec: dict = {"storageClassName": klass, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def storageclass(name: str, *zones: str) -> dict:
    doc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
           "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}
    if zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": "topology.ebs.csi.aws.com/zone",
                                                                "values": list(zones)}]}]
    return doc


def statefulset(replicas: int, *templates: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": replicas, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": t}, "spec": {"storageClassName": "gp3"}}
                                              for t in templates]}}


def pod(*claims: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}],
                     "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                 for i, c in enumerate(claims)]}}


def test_a_replica_whose_claims_are_in_two_zones_is_named():
    docs = [statefulset(3, "data", "logs"), storageclass("gp3")]
    for i, (dz, lz) in enumerate(((A, A), (A, B), (B, A))):
        docs += [pv(f"pv-d{i}", dz), pvc(f"data-db-{i}", f"pv-d{i}"), pv(f"pv-l{i}", lz), pvc(f"logs-db-{i}", f"pv-l{i}")]
    (pos, e), = volume_zone_warnings(docs)
    assert pos == 0 and e.path == "spec.volumeClaimTemplates"
    assert e.message == (f"replica db-1 (and 1 more replica(s)): PVC data-db-1 (PV pv-d1: {A}) and PVC logs-db-1 "
                         f"(PV pv-l1: {B}) are in zones no node shares: no node can mount them all, so the pod never "
                         f"schedules")


def test_a_bound_volume_and_a_class_allowed_elsewhere_exclude_each_other():
    docs = [pod("data", "scratch"), pv("pv-a", A, key="topology.ebs.csi.aws.com/zone"), pvc("data", "pv-a"),
            pvc("scratch", klass="zonal"), storageclass("zonal", B)]
    (pos, e), = volume_zone_warnings(docs)
    assert pos == 0 and e.path == "spec.volumes"
    assert "PVC data (PV pv-a: us-east-1a) and PVC scratch (StorageClass zonal: us-east-1b)" in e.message


@pytest.mark.parametrize("docs", [
    [pod("a", "b"), pv("pa", A), pvc("a", "pa"), pv("pb", A), pvc("b", "pb")],              # the same zone
    [pod("a", "b"), pv("pa", A), pvc("a", "pa"), storageclass("gp3"), pvc("b")],            # a class without zones
    [pod("a", "b"), pv("pa", A), pvc("a", "pa"), pvc("b", "not-given")],                    # a volume not given
    [pod("a", "missing"), pv("pa", A), pvc("a", "pa")],                                     # a claim not given
    [pod("a"), pv("pa", A), pvc("a", "pa")],                                                # one claim
    [pod("a", "b")],                                                                        # no claims given
    [statefulset(2, "data"), pv("p0", A), pvc("data-db-0", "p0"), pv("p1", B), pvc("data-db-1", "p1")],  # one each
])
def test_nothing_when_the_zones_meet_or_are_not_known(docs):
    assert volume_zone_warnings(docs) == []
