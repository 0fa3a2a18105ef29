"""api/limitrange.py: the LimitRanger admission (containers' default requests and limits, min / max refusals) and
validate's warning (api/admission_hints.limit_range_warnings)."""

from __future__ import annotations

from karpenter_lambda.api.admission_hints import limit_range_warnings
from karpenter_lambda.api.limitrange import admit, container_item, limit_ranges

RANGE = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "d", "namespace": "team"},
         "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"},
                              "max": {"memory": "4Gi"}, "min": {"cpu": "100m"}},
                             {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}]}}


def _pod(*containers: dict, init: tuple = ()) -> dict:
    spec = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": {"name": "p", "namespace": "team"}, "spec": spec}


def test_the_item_is_defaulted_as_the_api_server_stores_it():
    # max -> default, default -> defaultRequest, min -> defaultRequest (where still unset)
    assert container_item({"max": {"cpu": "2"}, "min": {"memory": "64Mi"}}) == {
        "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "64Mi"}, "min": {"memory": "64Mi"},
        "max": {"cpu": "2"}}


def test_containers_get_the_namespace_defaults():
    ranges = limit_ranges([RANGE])["team"]
    admitted, problem = admit(_pod({"name": "a"}, {"name": "b", "resources": {"limits": {"cpu": "2"}}},
                                   init=({"name": "i", "resources": {"requests": {"cpu": "200m"}}},)), ranges)
    assert problem is None
    a, b = admitted["spec"]["containers"]
    # no resources: the default request and limit; a limit only: it is the request (the pod's own defaulting)
    assert a["resources"] == {"limits": {"cpu": "1", "memory": "4Gi"}, "requests": {"cpu": "500m", "memory": "4Gi"}}
    assert b["resources"]["requests"]["cpu"] == "2" and b["resources"]["limits"]["cpu"] == "2"
    assert admitted["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] == "200m"
    assert admit(_pod({"name": "a"}), []) == (_pod({"name": "a"}), None)   # no LimitRange: as it is


def test_min_and_max_refuse_the_pod():
    ranges = limit_ranges([RANGE])["team"]
    assert admit(_pod({"name": "a", "resources": {"requests": {"cpu": "50m"}}}), ranges)[1] == \
        "minimum cpu usage per Container is 100m, but request is 50m (container a)"
    assert admit(_pod({"name": "a", "resources": {"limits": {"memory": "8Gi"}}}), ranges)[1] == \
        "maximum memory usage per Container is 4Gi, but limit is 8Gi (container a)"


def test_validate_warns_of_pods_a_limit_range_refuses_in_their_namespace():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team"},
                  "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "8Gi"}}}]}}}}
    found = [(pos, e.path, e.message) for pos, e in limit_range_warnings([RANGE, deployment])]
    assert found == [(1, "spec.template.spec.containers",
                      "maximum memory usage per Container is 4Gi, but limit is 8Gi (container c): the API server "
                      "refuses its pods (LimitRange in namespace team)")]
    deployment["metadata"]["namespace"] = "other"
    assert limit_range_warnings([RANGE, deployment]) == []
