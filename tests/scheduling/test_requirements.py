import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import Requirement, RequirementError, Requirements, pod_requests, untolerated

R = Requirement.new


def test_operators_and_has():
    assert R("k", "In", ["a", "b"]).has("a") and not R("k", "In", ["a"]).has("c")
    assert R("k", "NotIn", ["a"]).has("b") and not R("k", "NotIn", ["a"]).has("a")
    assert R("k", "Exists").has("anything") and not R("k", "DoesNotExist").has("x")
    assert R("k", "Gt", ["4"]).has("5") and not R("k", "Gt", ["4"]).has("4")
    assert R("k", "Lt", ["4"]).has("3") and not R("k", "Lt", ["4"]).has("4")
    assert R("k", "Gte", ["4"]).has("4") and not R("k", "Gte", ["4"]).has("3")
    assert R("k", "Lte", ["4"]).has("4") and not R("k", "Lte", ["4"]).has("5")
    assert not R("k", "Gt", ["4"]).has("abc")


def test_operator_round_trip():
    for op, vals in (("In", ["a"]), ("NotIn", ["a"]), ("Exists", None), ("DoesNotExist", None), ("Gt", ["3"]), ("Lt", ["3"])):
        assert R("k", op, vals).operator == op


@pytest.mark.parametrize("op,vals", [("Gt", []), ("Gt", ["x"]), ("Lt", ["1", "2"]), ("Bogus", ["a"])])
def test_bad_requirements(op, vals):
    with pytest.raises(RequirementError) as e:
        R("k", op, vals)
    assert "k" in str(e.value)


def test_intersection():
    a = R("k", "In", ["a", "b", "c"])
    assert a.intersection(R("k", "NotIn", ["b"])).values == {"a", "c"}
    assert a.intersection(R("k", "In", ["c", "d"])).values == {"c"}
    nn = R("k", "NotIn", ["a"]).intersection(R("k", "NotIn", ["b"]))
    assert nn.complement and nn.values == {"a", "b"}
    rng = R("k", "Gt", ["2"]).intersection(R("k", "Lt", ["5"]))
    assert rng.has("3") and rng.has("4") and not rng.has("5") and not rng.has("2")
    empty = R("k", "Gt", ["5"]).intersection(R("k", "Lt", ["6"]))
    assert empty.is_empty() and empty.operator == "DoesNotExist"
    b = R("k", "In", ["1", "8", "16"]).intersection(R("k", "Gte", ["8"]))
    assert b.values == {"8", "16"}
    mv = R("k", "In", ["a", "b"], 1).intersection(R("k", "Exists", None, 2))
    assert mv.min_values == 2


def test_requirements_intersects_and_negative_pairs():
    node = Requirements([R("k", "In", ["a"])])
    assert node.intersects(Requirements([R("k", "In", ["b"])])) is not None
    assert node.intersects(Requirements([R("k", "In", ["a", "b"])])) is None
    # two negative requirements never conflict even when the intersection is empty
    assert Requirements([R("k", "DoesNotExist")]).intersects(Requirements([R("k", "NotIn", ["x"])])) is None
    assert Requirements([R("k", "In", ["a"])]).intersects(Requirements([R("k", "DoesNotExist")])) is not None


def test_compatibility_custom_label_rule():
    node = Requirements([R(L.ARCH, "In", ["amd64"]), R("team", "In", ["a"])])
    # undefined custom key: only NotIn / DoesNotExist are allowed
    assert "does not have known values" in node.compatible(Requirements([R("owner", "In", ["x"])]))
    assert node.compatible(Requirements([R("owner", "DoesNotExist")])) is None
    assert node.compatible(Requirements([R("owner", "NotIn", ["x"])])) is None
    # undefined well-known key is fine
    assert node.compatible(Requirements([R(L.ZONE, "In", ["us-east-1a"])])) is None
    assert node.compatible(Requirements([R("team", "In", ["b"])])) is not None


def test_node_selector_and_beta_normalisation():
    r = Requirements.from_labels({"beta.kubernetes.io/arch": "arm64"})
    assert r.has(L.ARCH) and r.get(L.ARCH).values == {"arm64"}
    assert Requirements.from_list([{"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["z"]}]).has(L.ZONE)
    assert r.labels() == {L.ARCH: "arm64"}


def test_pod_requests_init_sidecars_overhead():
    pod = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                       {"resources": {"requests": {"cpu": "250m"}, "limits": {"memory": "512Mi"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "2"}}},  # regular init: 2 cpu
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}},  # sidecar
            {"resources": {"requests": {"memory": "3Gi"}}},  # regular init after the sidecar: 3Gi + 100Mi
        ],
        "overhead": {"cpu": "10m"},
    }}
    r = pod_requests(pod)
    assert r["cpu"] == 2000 + 10  # max(750 + 100, 2000) + overhead
    assert r["memory"] == 3 * 2**30 + 100 * 2**20  # max(1.5Gi + 100Mi, 3Gi + 100Mi)
    assert r["pods"] == 1


def test_pod_level_resources_are_the_pods_requests():
    """Kubernetes 1.34 (pod-level resources on by default): spec.resources sets cpu / memory / hugepages for the pod,
    whatever its containers ask; a pod-level limit alone is the request; the rest still comes from the containers,
    and the overhead on top.  Before, a pod asking 6 CPUs at the pod level was planned on a 1-vCPU node."""
    pod = {"spec": {
        "resources": {"requests": {"cpu": "6"}, "limits": {"memory": "8Gi", "hugepages-2Mi": "1Gi"}},
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}, {}],
        "overhead": {"cpu": "10m"},
    }}
    r = pod_requests(pod)
    assert r["cpu"] == 6000 + 10 and r["memory"] == 8 * 2**30 and r["hugepages-2Mi"] == 2**30
    assert r["nvidia.com/gpu"] == 1                                 # not a pod-level resource: the containers'
    with pytest.raises(ValueError) as e:
        pod_requests({"spec": {"resources": {"requests": {"cpu": "six"}}, "containers": [{}]}})
    assert "spec.resources" in str(e.value)


def test_pod_requests_bad_quantity_names_field():
    with pytest.raises(ValueError) as e:
        pod_requests({"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}})
    assert "spec.containers[0].resources" in str(e.value)


def test_taints():
    taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    assert untolerated([], [taint]) == taint
    assert untolerated([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}], [taint]) is None
    assert untolerated([{"key": "dedicated", "operator": "Exists"}], [taint]) is None
    assert untolerated([{"operator": "Exists"}], [taint]) is None
    assert untolerated([{"key": "dedicated", "value": "web"}], [taint]) == taint
    pns = {"key": "soft", "effect": "PreferNoSchedule"}
    assert untolerated([], [pns]) == pns
    assert untolerated([], [pns], tolerate_prefer_no_schedule=True) is None


def test_signature_is_kept_until_the_set_changes():
    """The signature is computed once per set and dropped by every change: a copy starts from it, an ``add``
    (also one that narrows an existing key) or ``without`` gives the signature of what the set now holds."""
    a = Requirements([R("k", "In", ["a", "b"])])
    s0 = a.signature()
    assert a.signature() is s0                                  # kept
    b = a.copy()
    assert b.signature() == s0
    b.add(R("k", "In", ["a"]))                                  # narrows k: a different set
    assert b.signature() != s0 and b.signature() == Requirements([R("k", "In", ["a"])]).signature()
    assert a.signature() == s0                                  # the original is unchanged
    a.add(R("z", "Exists"))
    assert a.signature() == Requirements([R("k", "In", ["a", "b"]), R("z", "Exists")]).signature()
    assert a.without("z").signature() == s0
    assert a.intersection(Requirements([R("k", "In", ["b"])])).signature() == \
        Requirements([R("k", "In", ["b"]), R("z", "Exists")]).signature()
