"""NodeOverlays are stored like NodePools: typed on the way back, reachable by their plural and short names."""

from karpenter_lambda.adapters.store import resolve_kind
from karpenter_lambda.api.objects import NodeOverlay


def overlay(name="savings-plan", **spec):
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                        "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                                   "values": ["m5"]}], "priceAdjustment": "-20%", **spec}})


def test_kind_names():
    assert {resolve_kind(k) for k in ("nodeoverlay", "nodeoverlays", "overlays", "overlay", "NodeOverlay")} == {"NodeOverlay"}


def test_round_trip_and_status(store):
    store.apply(overlay(weight=5))
    got = store.get("overlays", "savings-plan")
    assert type(got) is NodeOverlay and (got.weight, got.price_change) == (5, "-20%")
    assert got.to_dict()["apiVersion"] == "karpenter.sh/v1alpha1"
    store.update_status("NodeOverlay", "savings-plan", {"conditions": [{"type": "ValidationSucceeded", "status": "True"}]})
    store.apply(overlay(weight=7))   # a re-apply keeps the status the loader wrote
    again = store.get("NodeOverlay", "savings-plan")
    assert again.weight == 7 and again.status["conditions"][0]["type"] == "ValidationSucceeded"
    assert [o.name for o in store.list("nodeoverlays")] == ["savings-plan"]
