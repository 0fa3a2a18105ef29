"""The simulator's API server can hand out reproducible uids (so NodeClaim names repeat run to run)."""

from karpenter_lambda.sim.kubeapi import ObjectStore


def _uids(seed):
    store = ObjectStore(uid_seed=seed)
    return [store.create("pods", {"metadata": {"name": f"p{i}"}, "spec": {"containers": []}}, "default")["metadata"]["uid"]
            for i in range(3)]


def test_seeded_uids_repeat_and_differ_per_object():
    a, b = _uids("s"), _uids("s")
    assert a == b
    assert len(set(a)) == 3


def test_unseeded_or_other_seed_uids_differ():
    assert _uids(None) != _uids(None)
    assert _uids("s") != _uids("t")

