"""A disruption command abandoned with part of its replacements launched (an expiration whose other replacement met
no capacity; a scenario fuzz audit): the launched ones are announced with the reason they were launched for
(``Expired``), not the generic ``replacement`` of capacity launched ahead of a user's deletion."""

from __future__ import annotations

import types

from sim_events import Events

from karpenter_lambda.api.labels import PRICE_ANNOTATION, REPLACES_ANNOTATION
from karpenter_lambda.api.objects import NodeClaim


def _nodeclaim(name: str, replaces: str) -> NodeClaim:
    return NodeClaim({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                      "metadata": {"name": name, "annotations": {REPLACES_ANNOTATION: replaces, PRICE_ANNOTATION: "0.0761"},
                                   "labels": {"node.kubernetes.io/instance-type": "r7a.medium",
                                              "karpenter.sh/capacity-type": "on-demand",
                                              "topology.kubernetes.io/zone": "us-east-1a"}},
                      "spec": {}, "status": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"}})


def _report(**kw):
    base = {k: [] for k in ("proposed", "replacing", "disrupted", "blocked", "failed", "cancelled")}
    return types.SimpleNamespace(**{**base, **kw})


def test_the_launched_replacements_of_an_abandoned_expiration_say_expired():
    replacement = _nodeclaim("second-b0ed", "second-c7e3")
    ev = Events(types.SimpleNamespace(get=lambda kind, name: replacement if name == replacement.name else None))
    ev._disruption_reasons = {}
    ev._on_report("disruption", _report(failed=[{"nodeClaim": "second-c7e3", "reason": "Expired",
                                                 "why": "replacement second did not launch: no capacity"}]))
    ev._announce_unreported_launches([replacement])
    launched = [(obj, extra) for kind, obj, extra in ev.emitted if kind == "NodeClaimLaunched"]
    assert launched == [("nodeclaim/second-b0ed", {"replaces": ["second-c7e3"], "reason": "Expired"})]
    # a replacement no disruption report named: the generic reason, as before
    other = _nodeclaim("x-1", "x-0")
    ev._announce_unreported_launches([other])
    assert ev.emitted[-1][2] == {"replaces": ["x-0"], "reason": "replacement"}
