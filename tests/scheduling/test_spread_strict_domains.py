"""A topology spread counts its domains by the pod's required node affinity only (Karpenter's StrictRequirements,
kube-scheduler's nodeAffinityPolicy Honor): a preferred zone steers the pods while the skew allows, it never shrinks
the domains the skew is measured over.  Without that, every replica went to the preferred zone, which the
kube-scheduler then refuses (skew 2 > maxSkew 1), and the pods stayed pending while nodes kept launching there."""

from collections import Counter

from karpenter_lambda.api import labels as L

from .helpers import ZONES, pods, run

SPREAD = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "w"}}}]


def _prefer(zone: str, weight: int = 10) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [{"key": L.ZONE, "operator": "In", "values": [zone]}]}}]}}


def _zones(res) -> Counter:
    return Counter(n.zone for n in res.nodeclaims for _ in n.pods)


def test_a_preferred_zone_does_not_pile_a_do_not_schedule_spread_into_it():
    res = run(pods(len(ZONES), labels={"app": "w"}, affinity=_prefer(ZONES[0]), topologySpreadConstraints=SPREAD))
    assert not res.unschedulable
    assert _zones(res) == Counter({z: 1 for z in ZONES})


def test_more_replicas_than_zones_stay_within_the_skew():
    # (the preference is relaxed for the whole class once the skew refuses it, not pod by pod as Karpenter does, so
    # which zone takes the odd replica is not asserted)
    res = run(pods(2 * len(ZONES) + 1, labels={"app": "w"}, affinity=_prefer(ZONES[1]), topologySpreadConstraints=SPREAD))
    counts = _zones(res)
    assert not res.unschedulable and sum(counts.values()) == 2 * len(ZONES) + 1
    assert set(counts) == set(ZONES) and max(counts.values()) - min(counts.values()) <= 1


def test_a_required_zone_still_limits_the_domains():
    required = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.ZONE, "operator": "In", "values": ZONES[:2]}]}]}}}
    res = run(pods(4, labels={"app": "w"}, affinity=required, topologySpreadConstraints=SPREAD))
    assert not res.unschedulable and _zones(res) == Counter({ZONES[0]: 2, ZONES[1]: 2})
