"""Storage in the simulated cluster, without a simulation: the local API server's storage.k8s.io resources, the
kubelet's CSINode, the storage controllers (sim/storage.py), StatefulSet claims, and the kube-scheduler's volume
rules (sim/volumebinding.py) on nodes in three zones."""

from __future__ import annotations

import json
import urllib.request

import pytest
from kubernetes import client as k8s

from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.sim import storage
from karpenter_lambda.sim.kubeapi import StoreError
from karpenter_lambda.sim.kubescheduler import schedule_pending
from karpenter_lambda.sim.nodes import csi_drivers, ebs_attach_limit, join_node, make_node
from karpenter_lambda.sim.workloads import WorkloadController

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def server(kube_api_server):
    return kube_api_server


def _node(store, name, zone, csi=None, cpu="4"):
    node = make_node(name, f"aws:///{zone}/i-{name}", "m5.large", zone, {"cpu": cpu, "memory": "16Gi", "pods": "20"}, ready=True)
    return join_node(store, node, csi=csi)


def _pod(store, name, claims=(), ephemeral=None, **spec):
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    if ephemeral is not None:
        vols.append({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": ephemeral}}})
    return store.create("pods", {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}], "volumes": vols, **spec}})


def _class(store, name="gp3", mode="WaitForFirstConsumer", zones=None, provisioner="ebs.csi.aws.com", default=False):
    sc = {"metadata": {"name": name}, "provisioner": provisioner, **({"volumeBindingMode": mode} if mode else {})}
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    if default:
        sc["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return store.create("storageclasses", sc)


def _pvc(store, name, sc="gp3", volume=None, size="10Gi", **extra):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **extra}
    if sc is not None:
        spec["storageClassName"] = sc
    if volume:
        spec["volumeName"] = volume
    return store.create("persistentvolumeclaims", {"metadata": {"name": name, "namespace": "default"}, "spec": spec})


def _pv(store, name, zone, claim=None, sc="gp3", size="10Gi", driver="ebs.csi.aws.com"):
    spec = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": sc,
            "persistentVolumeReclaimPolicy": "Retain", "csi": {"driver": driver, "volumeHandle": f"vol-{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    return store.create("persistentvolumes", {"metadata": {"name": name}, "spec": spec})


def _three_zones(store, csi=None):
    for z in "abc":
        _node(store, f"n-{z}", f"us-east-1{z}", csi=csi)


def _sched_msg(store, pod):
    p = store.get("pods", pod, "default")
    return next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")["message"]


# ---------------------------------------------------------------------------------------------- the API server
def test_the_official_client_lists_storage_objects_and_discovery_names_them(server):
    st = server.store
    _class(st)
    _pv(st, "pv-a", "us-east-1a", claim="data")
    _pvc(st, "data", volume="pv-a")
    _node(st, "n-a", "us-east-1a", csi={"ebs.csi.aws.com": 26})
    api = server.api_client()
    classes = k8s.StorageV1Api(api).list_storage_class().items
    assert [(c.metadata.name, c.provisioner, c.volume_binding_mode) for c in classes] == [("gp3", "ebs.csi.aws.com", "WaitForFirstConsumer")]
    csinodes = k8s.StorageV1Api(api).list_csi_node().items
    assert [(c.metadata.name, c.spec.drivers[0].name, c.spec.drivers[0].node_id, c.spec.drivers[0].allocatable.count)
            for c in csinodes] == [("n-a", "ebs.csi.aws.com", "i-n-a", 26)]
    assert csinodes[0].metadata.owner_references[0].kind == "Node"
    pvcs = k8s.CoreV1Api(api).list_persistent_volume_claim_for_all_namespaces().items
    assert [(c.metadata.namespace, c.metadata.name, c.spec.volume_name) for c in pvcs] == [("default", "data", "pv-a")]
    pvs = k8s.CoreV1Api(api).list_persistent_volume().items
    assert pvs[0].spec.node_affinity.required.node_selector_terms[0].match_expressions[0].values == ["us-east-1a"]
    groups = json.load(urllib.request.urlopen(server.url + "/apis"))["groups"]
    assert {"name": "storage.k8s.io", "versions": [{"groupVersion": "storage.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "storage.k8s.io/v1", "version": "v1"}} in groups
    res = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/apis/storage.k8s.io/v1"))["resources"]}
    assert res["storageclasses"]["namespaced"] is False and res["csinodes"]["kind"] == "CSINode"
    core = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/api/v1"))["resources"]}
    assert core["persistentvolumes"]["namespaced"] is False and core["persistentvolumeclaims"]["namespaced"] is True
    kc = KubeClient.from_host(server.url)
    assert [len(kc.list_pvcs()), len(kc.list_pvs()), len(kc.list_storageclasses()), len(kc.list_csinodes())] == [1, 1, 1, 1]


def test_a_class_needs_a_provisioner_and_claims_get_the_default_class(server):
    st = server.store
    with pytest.raises(StoreError) as e:
        st.create("storageclasses", {"metadata": {"name": "bad"}})
    assert e.value.code == 422 and "provisioner: Required value" in e.value.message
    _pvc(st, "before", sc=None)
    _class(st, "gp2", mode="Immediate", default=True)
    _pvc(st, "after", sc=None)
    _pvc(st, "none", sc="")
    assert "storageClassName" not in st.get("persistentvolumeclaims", "before", "default")["spec"]
    assert st.get("persistentvolumeclaims", "after", "default")["spec"]["storageClassName"] == "gp2"   # admission
    assert st.get("persistentvolumeclaims", "none", "default")["spec"]["storageClassName"] == ""       # explicit: none
    storage.sync(st)
    assert st.get("persistentvolumeclaims", "before", "default")["spec"]["storageClassName"] == "gp2"  # retroactive
    assert st.get("persistentvolumeclaims", "none", "default")["status"]["phase"] == "Pending"         # no class: static only


# ---------------------------------------------------------------------------------------------- the kubelet's CSINode
def test_a_node_registers_its_csinode_and_it_goes_with_the_node(server):
    st = server.store
    _node(st, "n-a", "us-east-1a", csi=csi_drivers("us-east-1", "m5.large"))
    _node(st, "n-x", "us-east-1b", csi=csi_drivers("us-east-1", "x9.unknown"))
    a = st.get("csinodes", "n-a")
    assert a["spec"]["drivers"] == [{"name": "ebs.csi.aws.com", "nodeID": "i-n-a", "allocatable": {"count": 26},
                                     "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}]
    assert "allocatable" not in st.get("csinodes", "n-x")["spec"]["drivers"][0]        # unknown type: no count
    assert st.get("nodes", "n-a")["metadata"]["labels"]["topology.ebs.csi.aws.com/zone"] == "us-east-1a"
    st.delete("nodes", "n-a")
    assert st.get("csinodes", "n-a") is None and st.get("csinodes", "n-x") is not None
    # a finalizer holds the node: its CSINode stays until the node is really gone
    st.patch("nodes", "n-x", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    st.delete("nodes", "n-x")
    assert st.get("csinodes", "n-x") is not None
    st.patch("nodes", "n-x", {"metadata": {"finalizers": []}})
    assert st.get("csinodes", "n-x") is None


def test_the_attach_limit_is_the_types_minus_the_nodeclass_block_devices():
    # m5.large: MaximumEbsAttachments 27 (shared with the primary ENI already taken out) minus the root volume
    assert ebs_attach_limit("us-east-1", "m5.large") == 26
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "two"},
                 "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "blockDeviceMappings": [
                     {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}, {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}]}}
    assert ebs_attach_limit("us-east-1", "m5.large", nodeclass) == 25
    assert ebs_attach_limit("us-east-1", "x9.unknown") is None


# ---------------------------------------------------------------------------------------------- kube-scheduler
def test_a_bound_volume_takes_its_pod_to_its_zone(server):
    st = server.store
    _three_zones(st)
    _class(st)
    _pv(st, "pv-c", "us-east-1c", claim="data")
    _pvc(st, "data", volume="pv-c")
    storage.sync(st)
    assert st.get("persistentvolumeclaims", "data", "default")["status"]["phase"] == "Bound"
    assert st.get("persistentvolumes", "pv-c")["spec"]["claimRef"]["uid"] == st.get("persistentvolumeclaims", "data", "default")["metadata"]["uid"]
    _pod(st, "db", claims=["data"])
    assert schedule_pending(server).bound == [("default/db", "n-c")]


def test_a_volume_in_a_zone_without_nodes_keeps_the_pod_pending(server):
    st = server.store
    _node(st, "n-a", "us-east-1a")
    _node(st, "n-b", "us-east-1b")
    _pv(st, "pv-c", "us-east-1c", claim="data")
    _pvc(st, "data", volume="pv-c")
    storage.sync(st)
    _pod(st, "db", claims=["data"])
    res = schedule_pending(server)
    assert res.bound == []
    assert res.unschedulable["default/db"] == "0/2 nodes are available: 2 node(s) had volume node affinity conflict."
    assert _sched_msg(st, "db") == res.unschedulable["default/db"]


def test_wait_for_first_consumer_provisions_in_the_nodes_zone_within_allowed_topologies(server):
    st = server.store
    _three_zones(st)
    _class(st, zones=["us-east-1b"])
    _pvc(st, "data")
    storage.sync(st)
    assert st.get("persistentvolumeclaims", "data", "default")["status"]["phase"] == "Pending"   # waits for its pod
    assert st.list("persistentvolumes") == []
    _pod(st, "db", claims=["data"])
    assert schedule_pending(server).bound == [("default/db", "n-b")]
    pvc = st.get("persistentvolumeclaims", "data", "default")
    pv = st.get("persistentvolumes", pvc["spec"]["volumeName"])
    assert pvc["status"]["phase"] == "Bound" and pv["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n-b"
    assert pv["metadata"]["name"] == f"pvc-{pvc['metadata']['uid']}"
    assert pv["spec"]["csi"]["driver"] == "ebs.csi.aws.com" and pv["spec"]["storageClassName"] == "gp3"
    assert pv["spec"]["capacity"] == {"storage": "10Gi"} and pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]}]}]
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]


def test_allowed_topologies_with_no_node_there_is_a_bind_conflict(server):
    st = server.store
    _node(st, "n-a", "us-east-1a")
    _class(st, zones=["us-east-1c"])
    _pvc(st, "data")
    _pod(st, "db", claims=["data"])
    res = schedule_pending(server)
    assert res.unschedulable["default/db"] == "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind."
    assert st.list("persistentvolumes") == []


def test_wait_for_first_consumer_takes_an_available_volume_that_fits_the_node(server):
    st = server.store
    _three_zones(st)
    _class(st, provisioner="kubernetes.io/no-provisioner")     # static volumes only
    _pv(st, "small-a", "us-east-1a", size="5Gi")
    _pv(st, "big-c", "us-east-1c", size="20Gi")
    _pvc(st, "data", size="10Gi")
    storage.sync(st)
    assert st.get("persistentvolumes", "big-c")["status"]["phase"] == "Available"
    _pod(st, "db", claims=["data"])
    assert schedule_pending(server).bound == [("default/db", "n-c")]
    assert st.get("persistentvolumeclaims", "data", "default")["spec"]["volumeName"] == "big-c"


def test_immediate_binds_at_creation_in_the_first_allowed_zone_or_the_regions_first(server):
    st = server.store
    _three_zones(st)
    _class(st, "fast", mode="Immediate", zones=["us-east-1c", "us-east-1b"])
    _class(st, "plain", mode=None, provisioner="kubernetes.io/aws-ebs")   # no volumeBindingMode: Immediate; in-tree -> CSI
    _pvc(st, "c-claim", sc="fast")
    _pvc(st, "r-claim", sc="plain")
    storage.sync(st, "us-west-2")
    zone = {}
    for name in ("c-claim", "r-claim"):
        pvc = st.get("persistentvolumeclaims", name, "default")
        assert pvc["status"]["phase"] == "Bound"
        pv = st.get("persistentvolumes", pvc["spec"]["volumeName"])
        assert pv["spec"]["csi"]["driver"] == "ebs.csi.aws.com"
        zone[name] = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert zone == {"c-claim": ["us-east-1c"], "r-claim": ["us-west-2a"]}
    _pod(st, "p", claims=["c-claim"])
    assert schedule_pending(server).bound == [("default/p", "n-c")]


def test_missing_claim_or_class_keeps_the_pod_pending_with_a_clear_message(server):
    st = server.store
    _three_zones(st)
    _pvc(st, "orphan", sc="nope")
    _pod(st, "no-claim", claims=["data-db-0"])
    _pod(st, "no-class", claims=["orphan"])
    res = schedule_pending(server)
    assert res.bound == []
    assert res.unschedulable == {
        "default/no-claim": '0/3 nodes are available: persistentvolumeclaim "data-db-0" not found.',
        "default/no-class": '0/3 nodes are available: storageclass.storage.k8s.io "nope" not found.'}
    _pvc(st, "data-db-0", sc="gp3")
    _class(st)
    _class(st, "nope")
    assert sorted(schedule_pending(server).bound) == [("default/no-claim", "n-a"), ("default/no-class", "n-b")]


def test_an_unbound_immediate_claim_is_not_scheduled(server):
    st = server.store
    _three_zones(st)
    _class(st, "manual", mode="Immediate", provisioner="kubernetes.io/no-provisioner")
    _pvc(st, "data", sc="manual")
    storage.sync(st)
    _pod(st, "p", claims=["data"])
    assert schedule_pending(server).unschedulable["default/p"] == (
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.")


def test_the_csinode_attach_limit_counts_distinct_claims_on_the_node(server):
    st = server.store
    _node(st, "n-a", "us-east-1a", csi={"ebs.csi.aws.com": 2})
    _node(st, "n-b", "us-east-1b", csi={"ebs.csi.aws.com": None})   # no count: no limit
    _class(st, zones=["us-east-1a"])
    _class(st, "gp3b", zones=["us-east-1b"])
    for c in ("a1", "a2", "a3"):
        _pvc(st, c)
    _pod(st, "two", claims=["a1", "a2"])
    assert schedule_pending(server).bound == [("default/two", "n-a")]
    _pod(st, "same", claims=["a1", "a2"])       # the same claims again: still 2 on the node
    assert schedule_pending(server).bound == [("default/same", "n-a")]
    _pod(st, "third", claims=["a3"])
    res = schedule_pending(server)
    assert res.unschedulable["default/third"] == (
        "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to bind, "
        "1 node(s) exceed max volume count.")
    for c in ("b1", "b2", "b3"):
        _pvc(st, c, sc="gp3b")
    _pod(st, "many", claims=["b1", "b2", "b3"])
    assert schedule_pending(server).bound == [("default/many", "n-b")]


def test_volume_rules_work_over_http_with_the_kube_client(server):
    st = server.store
    _three_zones(st)
    _class(st)
    _pvc(st, "data")
    _pod(st, "db", claims=["data"], nodeSelector={ZONE: "us-east-1c"})
    kc = KubeClient.from_host(server.url)
    assert schedule_pending(kc).bound == [("default/db", "n-c")]
    pvc = st.get("persistentvolumeclaims", "data", "default")
    assert pvc["status"]["phase"] == "Bound"
    pv = st.get("persistentvolumes", pvc["spec"]["volumeName"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["us-east-1c"]


# ---------------------------------------------------------------------------------------------- claims from workloads
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"}, "spec": {
    "replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
    "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
        "containers": [{"name": "db", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "c"}}]}},
    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
        "storageClassName": "gp3", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}


def test_a_statefulset_gets_its_claims_and_reuses_existing_ones(server):
    st = server.store
    _three_zones(st)
    _class(st)
    _pvc(st, "data-db-1", size="5Gi")          # there before the StatefulSet: reused, not replaced
    wc = WorkloadController(server)
    wc.add(STS)
    wc.reconcile()
    claims = {c["metadata"]["name"]: c for c in st.list("persistentvolumeclaims")}
    assert sorted(claims) == ["data-db-0", "data-db-1"]
    assert claims["data-db-0"]["metadata"]["labels"] == {"app": "db"}
    assert claims["data-db-0"]["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claims["data-db-1"]["spec"]["resources"]["requests"]["storage"] == "5Gi"
    pod = st.get("pods", "db-1", "default")
    assert pod["spec"]["volumes"] == [{"name": "conf", "configMap": {"name": "c"}},
                                      {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}]
    assert len(schedule_pending(server).bound) == 2
    wc.scale("StatefulSet", "default", "db", 0)
    wc.reconcile()
    assert st.list("pods") == [] and len(st.list("persistentvolumeclaims")) == 2   # claims are retained


def test_an_ephemeral_volume_gets_a_claim_owned_by_its_pod_and_goes_with_it(server):
    st = server.store
    _three_zones(st)
    _class(st)
    pod = _pod(st, "web", ephemeral={"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                                     "resources": {"requests": {"storage": "1Gi"}}})
    res = schedule_pending(server)        # no controller ran yet
    assert res.unschedulable["default/web"] == ('0/3 nodes are available: waiting for ephemeral volume controller to '
                                                'create the persistentvolumeclaim "web-scratch".')
    storage.sync(st)
    pvc = st.get("persistentvolumeclaims", "web-scratch", "default")
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    assert schedule_pending(server).bound == [("default/web", "n-a")]
    pv_name = st.get("persistentvolumeclaims", "web-scratch", "default")["spec"]["volumeName"]
    assert st.get("persistentvolumes", pv_name)["status"]["phase"] == "Bound"
    st.delete("pods", "web", "default")
    _pod(st, "web", ephemeral={"storageClassName": "gp3"})   # same name, new uid: the old claim is not its
    assert "pod is not owner" in schedule_pending(server).unschedulable["default/web"]
    storage.sync(st)
    new = st.get("persistentvolumeclaims", "web-scratch", "default")
    assert new["metadata"]["uid"] != pvc["metadata"]["uid"] and "volumeName" not in new["spec"]
    assert st.get("persistentvolumes", pv_name) is None        # reclaim policy Delete: the old volume is gone
