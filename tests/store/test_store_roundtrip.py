"""Round trips through the pynamodb state store on moto (mock_aws)."""

from datetime import datetime, timezone

import pytest
from store_objects import nodeclaim, nodeclass, nodepool

from karpenter_lambda.adapters.store import (
    AlreadyExists, Conflict, NotFound, Store, merge_patch, resolve_kind, state_model,
)
from karpenter_lambda.api.objects import EC2NodeClass, NodeClaim, NodePool


def test_create_get_round_trip_each_kind(store):
    for obj, cls in ((nodepool(), NodePool), (nodeclass(), EC2NodeClass), (nodeclaim(), NodeClaim)):
        created = store.create(obj)
        got = store.get(obj.kind, obj.name)
        assert type(got) is cls
        assert got == created
        assert got.spec == obj.spec
        assert got.metadata["resourceVersion"] == "1"
        assert got.metadata["generation"] == 1
        assert got.metadata["creationTimestamp"].endswith("Z")
        assert len(got.metadata["uid"]) == 36
        assert got.to_dict()["apiVersion"] == obj.to_dict()["apiVersion"]
    assert store.get("NodeClaim", "default-abcde").nodepool_name == "default"


def test_create_does_not_mutate_input(store):
    obj = nodepool()
    before = obj.to_dict()
    store.create(obj)
    assert obj.to_dict() == before


def test_create_twice_is_already_exists_naming_kind_name_cluster(store):
    store.create(nodepool())
    with pytest.raises(AlreadyExists) as e:
        store.create(nodepool(weight=50))
    assert str(e.value) == 'NodePool "default" already exists in cluster "test-cluster"'
    assert store.get("NodePool", "default").weight == 10


def test_generate_name(store):
    obj = nodeclaim()
    obj.doc["metadata"] = {"generateName": "default-", "labels": {"karpenter.sh/nodepool": "default"}}
    a, b = store.create(obj), store.create(obj)
    assert a.name.startswith("default-") and len(a.name) == len("default-") + 5
    assert a.name != b.name
    assert {o.name for o in store.list("NodeClaim")} == {a.name, b.name}


def test_create_requires_name(store):
    obj = nodepool()
    del obj.doc["metadata"]["name"]
    with pytest.raises(ValueError, match="metadata.name"):
        store.create(obj)


def test_put_creates_then_replaces_bumping_version_and_generation(store):
    first = store.put(nodepool())
    assert first.metadata["resourceVersion"] == "1"
    same_spec = store.put(nodepool())
    assert same_spec.metadata["resourceVersion"] == "2"
    assert same_spec.metadata["generation"] == 1          # spec unchanged
    changed = store.put(nodepool(weight=42))
    assert changed.metadata["resourceVersion"] == "3"
    assert changed.metadata["generation"] == 2
    assert changed.metadata["uid"] == first.metadata["uid"]
    assert changed.metadata["creationTimestamp"] == first.metadata["creationTimestamp"]
    assert store.get("np", "default").weight == 42


def test_put_with_stale_resource_version_conflicts(store):
    stored = store.create(nodepool())
    a, b = stored.copy(), stored.copy()
    a.spec["weight"] = 1
    assert store.put(a).metadata["resourceVersion"] == "2"
    b.spec["weight"] = 2
    with pytest.raises(Conflict) as e:
        store.put(b)
    assert "NodePool" in str(e.value) and '"default"' in str(e.value) and "test-cluster" in str(e.value)
    assert store.get("NodePool", "default").weight == 1   # the stale write did not land


def test_put_with_resource_version_of_deleted_object_conflicts(store):
    stored = store.create(nodepool())
    store.delete("NodePool", "default")
    with pytest.raises(Conflict, match="no longer exists"):
        store.put(stored)
    assert store.get("NodePool", "default") is None


def test_apply_keeps_status_finalizers_and_controller_annotations(store):
    store.create(nodepool())
    store.update_status("NodePool", "default", {"conditions": [{"type": "Ready", "status": "True"}]})

    def controller(obj):
        obj.metadata["finalizers"] = ["karpenter.sh/termination"]
        obj.metadata["annotations"] = {"karpenter.sh/nodepool-hash": "123", "team": "old"}

    store.update("NodePool", "default", controller)
    manifest = nodepool(weight=77)
    manifest.doc["metadata"]["resourceVersion"] = "999"  # ignored by apply
    manifest.doc["metadata"]["annotations"] = {"team": "new"}
    applied = store.apply(manifest)
    assert applied.weight == 77
    assert applied.status == {"conditions": [{"type": "Ready", "status": "True"}]}
    assert applied.metadata["finalizers"] == ["karpenter.sh/termination"]
    assert applied.annotations == {"team": "new", "karpenter.sh/nodepool-hash": "123"}
    assert applied.metadata["generation"] == 2


def test_list_sorted_and_isolated_by_kind_and_cluster(store):
    for name in ("zeta", "alpha", "mid"):
        store.create(nodepool(name))
    store.create(nodeclass("alpha"))
    other = Store("other-cluster", table_name="state-test")
    other.create(nodepool("alpha", weight=99))
    assert [o.name for o in store.list("nodepools")] == ["alpha", "mid", "zeta"]
    assert [o.name for o in store.list("EC2NodeClass")] == ["alpha"]
    assert store.list("NodeClaim") == []
    assert store.get("NodePool", "alpha").weight == 10
    assert other.get("NodePool", "alpha").weight == 99
    assert [o.name for o in other.list("NodePool")] == ["alpha"]
    assert other.delete("NodePool", "alpha") is True
    assert store.get("NodePool", "alpha") is not None


def test_delete(store):
    store.create(nodepool())
    assert store.delete("NodePool", "default") is True
    assert store.get("NodePool", "default") is None
    assert store.delete("NodePool", "default") is False
    store.create(nodepool("a"))
    store.create(nodepool("b"))
    assert store.delete_all("np") == 2
    assert store.list("NodePool") == []


def test_update_in_place_and_by_replacement(store):
    store.create(nodepool())

    def bump(obj):
        obj.spec["weight"] = obj.weight + 1

    assert store.update("NodePool", "default", bump).weight == 11

    def replace(obj):
        new = obj.copy()
        new.spec["limits"] = {"cpu": "100"}
        return new

    out = store.update("NodePool", "default", replace)
    assert out.limits == {"cpu": "100"}
    assert out.metadata["resourceVersion"] == "3"
    assert out.metadata["generation"] == 3
    assert store.get("NodePool", "default") == out


def test_update_without_change_does_not_write(store):
    store.create(nodepool())

    def touch(obj):
        obj.status  # reading .status inserts an empty dict: not a change
        obj.spec["weight"] = 10

    out = store.update("NodePool", "default", touch)
    assert out.metadata["resourceVersion"] == "1"
    assert store.get("NodePool", "default").metadata["resourceVersion"] == "1"


def test_update_missing_is_not_found(store):
    with pytest.raises(NotFound) as e:
        store.update("NodeClaim", "nope", lambda o: None)
    assert str(e.value) == 'NodeClaim "nope" not found in cluster "test-cluster"'


def test_update_may_not_rename(store):
    store.create(nodepool())

    def rename(obj):
        obj.metadata["name"] = "other"

    with pytest.raises(ValueError, match="must not change kind or name"):
        store.update("NodePool", "default", rename)


def test_update_status_merge_patch(store):
    store.create(nodeclaim())
    store.update_status("nc", "default-abcde", {"providerID": "aws:///us-east-1a/i-1", "capacity": {"cpu": "2", "memory": "8Gi"}})
    out = store.update_status("NodeClaim", "default-abcde", {"capacity": {"memory": None, "pods": "29"}, "imageID": "ami-1"})
    assert out.status == {"providerID": "aws:///us-east-1a/i-1", "capacity": {"cpu": "2", "pods": "29"}, "imageID": "ami-1"}
    assert out.metadata["generation"] == 1  # status changes never bump generation
    assert store.get("NodeClaim", "default-abcde").status == out.status


def test_clock_sets_creation_timestamp(aws):
    s = Store("clocked", table_name="state-clock", clock=lambda: datetime(2030, 5, 6, 7, 8, 9, tzinfo=timezone.utc))
    s.ensure_table()
    assert s.create(nodepool()).metadata["creationTimestamp"] == "2030-05-06T07:08:09Z"


def test_other_kinds_round_trip_as_kubeobject(store):
    from karpenter_lambda.api.objects import KubeObject
    obj = KubeObject({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}, "spec": {"providerID": "x"}})
    store.create(obj)
    got = store.get("Node", "n1")
    assert type(got) is KubeObject and got.labels == {"a": "b"} and got.spec == {"providerID": "x"}


def test_cluster_name_rules():
    with pytest.raises(ValueError, match="must not contain"):
        Store("a#b")
    with pytest.raises(ValueError, match="non-empty"):
        Store("")


def test_resolve_kind_aliases():
    assert resolve_kind("nodepools") == resolve_kind("NP") == resolve_kind(NodePool) == "NodePool"
    assert resolve_kind("ec2nc") == resolve_kind("EC2NodeClasses") == "EC2NodeClass"
    assert resolve_kind("nc") == resolve_kind("nodeclaim") == "NodeClaim"
    assert resolve_kind("Pod") == "Pod"


def test_merge_patch():
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"c": None, "d": 3}, "l": [2], "n": None}) == \
        {"a": {"b": 1, "d": 3}, "l": [2]}


def test_model_factory_caches_per_binding(aws):
    a = state_model("t1", "us-east-1", None)
    assert state_model("t1", "us-east-1", None) is a
    b = state_model("t2", "us-east-1", None)
    assert b is not a and b.Meta.table_name == "t2" and a.Meta.table_name == "t1"
    s1, s2 = Store("c", table_name="t1"), Store("c", table_name="t2")
    s1.ensure_table()
    s2.ensure_table()
    s1.create(nodepool(weight=1))
    s2.create(nodepool(weight=2))
    assert s1.get("NodePool", "default").weight == 1 and s2.get("NodePool", "default").weight == 2


def test_store_owns_uid_and_timestamps(store):
    obj = nodepool()
    obj.doc["metadata"].update(uid="foreign-uid", creationTimestamp="2001-01-01T00:00:00Z", generation=7, resourceVersion=None)
    del obj.doc["metadata"]["resourceVersion"]
    created = store.put(obj)
    assert created.metadata["uid"] != "foreign-uid" and len(created.metadata["uid"]) == 36
    assert created.metadata["creationTimestamp"] != "2001-01-01T00:00:00Z"
    assert created.metadata["generation"] == 1


def test_items_written_by_the_stack_are_readable_and_updatable(store):
    """infra/nodepools.py writes NodePools with a low-level UpdateItem: no uid, timestamps or status."""
    import json

    import boto3
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    spec = nodepool().spec
    ddb.update_item(
        TableName="state-test", Key={"pk": {"S": "test-cluster#NodePool"}, "sk": {"S": "from-cdk"}},
        UpdateExpression="SET #c = :c, #k = :k, #a = :a, #m = :m, #s = :s ADD #v :one",
        ExpressionAttributeNames={"#c": "cluster", "#k": "kind", "#a": "apiVersion", "#m": "metadata", "#s": "spec", "#v": "version"},
        ExpressionAttributeValues={":c": {"S": "test-cluster"}, ":k": {"S": "NodePool"}, ":a": {"S": "karpenter.sh/v1"},
                                   ":m": {"S": json.dumps({"name": "from-cdk"})}, ":s": {"S": json.dumps(spec)}, ":one": {"N": "1"}},
    )
    got = store.get("NodePool", "from-cdk")
    assert isinstance(got, NodePool) and got.spec == spec and got.metadata["resourceVersion"] == "1"
    out = store.update_status("NodePool", "from-cdk", {"conditions": [{"type": "Ready", "status": "True"}]})
    assert out.metadata["resourceVersion"] == "2" and len(out.metadata["uid"]) == 36
    assert out.metadata["creationTimestamp"] and out.metadata["generation"] == 1
    assert [o.name for o in store.list("NodePool")] == ["from-cdk"]
