from karpenter_lambda.api.workloads import expand, expand_all

TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}


def test_deployment_expands_to_replicas_with_shared_owner():
    w = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "prod"},
                "spec": {"replicas": 4, "template": TEMPLATE}})
    assert len(w.pods) == 4
    assert {p["metadata"]["namespace"] for p in w.pods} == {"prod"}
    owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in w.pods}
    assert len(owners) == 1
    assert len({p["metadata"]["uid"] for p in w.pods}) == 4
    # the Deployment controller's pod-template-hash: its ReplicaSet's hash (what matchLabelKeys reads)
    rs = w.pods[0]["metadata"]["ownerReferences"][0]["name"]
    assert all(p["metadata"]["labels"] == {"app": "x", "pod-template-hash": rs.rsplit("-", 1)[1]} for p in w.pods)
    assert TEMPLATE["metadata"]["labels"] == {"app": "x"}   # the template itself is not changed
    cond = w.pods[0]["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")


def test_names_and_uids_are_deterministic():
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2, "template": TEMPLATE}}
    a, b = expand(doc), expand(doc)
    assert [p["metadata"]["uid"] for p in a.pods] == [p["metadata"]["uid"] for p in b.pods]


def test_statefulset_job_cronjob_pod_and_daemonset():
    w = expand_all([
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"replicas": 2, "template": TEMPLATE}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 5, "completions": 3, "template": TEMPLATE}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo"}, "spec": TEMPLATE["spec"]},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": TEMPLATE}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
    ])
    names = [p["metadata"]["name"] for p in w.pods]
    assert names[:2] == ["db-0", "db-1"]
    assert len(w.pods) == 2 + 3 + 1 + 1
    assert "solo" in names
    assert [d["metadata"]["name"] for d in w.daemonsets] == ["ds"]
    assert w.ignored == ["ConfigMap/cm"]
    assert not w.issues


def test_zero_replicas_and_bad_replicas():
    w = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {"replicas": 0, "template": TEMPLATE}})
    assert w.pods == [] and not w.issues
    w = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {"replicas": "three", "template": TEMPLATE}}, file="f.yaml", index=2)
    assert w.pods == []
    assert str(w.issues[0]) == "f.yaml:2: Deployment/a: spec.replicas: must be a non-negative integer, got 'three'"
    w = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {"replicas": 1}})
    assert w.issues[0].path == "spec.template"


def test_bound_pod_keeps_no_unschedulable_condition():
    w = expand({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": []}})
    assert "status" not in w.pods[0]


def test_a_workload_of_more_pods_than_plan_can_expand_is_refused_with_the_limit(monkeypatch):
    # a typo (replicas: 5000000) must not build millions of pods: no pod, one issue naming the field and the limit
    from karpenter_lambda.api import workloads

    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 5_000_000, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}}}
    w = expand(doc, "f.yaml", 0)
    assert w.pods == [] and [(i.path, i.message) for i in w.issues] == [
        ("spec.replicas", "5,000,000 pods: plan and simulate expand at most 100,000 pods per workload; lower it to "
                          "plan or simulate this workload")]
    monkeypatch.setattr(workloads, "MAX_PODS_PER_WORKLOAD", 10)   # the limit itself is expanded, one more is not
    doc["spec"]["replicas"] = 10
    assert len(expand(doc).pods) == 10
    doc["spec"]["replicas"] = 11
    assert expand(doc).pods == []


def test_replica_names_are_distinct_however_many_replicas():
    """5 hex digits per replica collide within a few hundred (443 replicas of web gave two pods one name); a suffix
    already taken is hashed again, and the first replicas keep their names whatever the count."""
    def names(n):
        doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": n, "template": TEMPLATE}}
        return [p["metadata"]["name"] for p in expand(doc).pods]
    many = names(2000)
    assert len(set(many)) == 2000
    assert names(10) == many[:10]
