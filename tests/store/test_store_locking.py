"""Optimistic locking: concurrent writers never lose an update."""

import threading

import pytest
from pynamodb.exceptions import PutError
from store_objects import nodeclaim, nodepool

from karpenter_lambda.adapters.store import Conflict


def test_concurrent_updates_lose_nothing(store, atomic_dynamodb):
    """N threads read the same version (a barrier makes the race certain), each increments a counter in status."""
    n = 8
    store.create(nodeclaim())
    barrier = threading.Barrier(n, timeout=30)
    calls = []
    lock = threading.Lock()
    errors = []

    def increment(obj):
        with lock:
            calls.append(obj.metadata["resourceVersion"])
        if obj.metadata["resourceVersion"] == "1":
            barrier.wait()  # everybody has read version 1 before anybody writes
        obj.status["counter"] = obj.status.get("counter", 0) + 1

    def worker():
        try:
            store.update("NodeClaim", "default-abcde", increment, retries=n)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    final = store.get("NodeClaim", "default-abcde")
    assert final.status["counter"] == n
    assert final.metadata["resourceVersion"] == str(1 + n)
    assert calls.count("1") == n          # all n read version 1 ...
    assert len(calls) > n                 # ... so n-1 lost the race and retried


def test_update_gives_up_with_conflict(store):
    """A writer that always loses (someone writes between its read and write) ends in Conflict."""
    store.create(nodepool())
    attempts = []

    def lose(obj):
        attempts.append(obj.metadata["resourceVersion"])
        store.update_status("NodePool", "default", {"bumps": len(attempts)})  # a concurrent writer slips in
        obj.spec["weight"] = 99

    with pytest.raises(Conflict) as e:
        store.update("NodePool", "default", lose, retries=2)
    assert len(attempts) == 3
    assert 'NodePool "default" in cluster "test-cluster" was modified concurrently' in str(e.value)
    got = store.get("NodePool", "default")
    assert got.weight == 10 and got.status == {"bumps": 3}


def test_raw_stale_write_is_rejected_by_version_attribute(store):
    """Below the Store API: two pynamodb items loaded at version 1; the second save fails the version condition."""
    store.create(nodepool())
    model = store.model
    a = model.get("test-cluster#NodePool", "default", consistent_read=True)
    b = model.get("test-cluster#NodePool", "default", consistent_read=True)
    assert a.version == b.version == 1
    a.spec = {**a.spec, "weight": 20}
    a.save()
    assert a.version == 2
    b.spec = {**b.spec, "weight": 30}
    with pytest.raises(PutError) as e:
        b.save()
    assert e.value.cause_response_code == "ConditionalCheckFailedException"
    assert store.get("NodePool", "default").weight == 20
