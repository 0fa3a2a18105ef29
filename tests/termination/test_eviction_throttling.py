"""An eviction 429 is a PodDisruptionBudget block only when the API server says so (issue 21, defect 10): a 429
from API Priority and Fairness (Retry-After, no DisruptionBudget cause) is throttling, recorded as such, and the
drain backs off for this call."""

import json
import urllib.request

from karpenter_lambda.disruption.eviction import refused_by_budget


def test_the_pure_rule():
    pdb = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
           "message": "Cannot evict pod as it would violate the pod's disruption budget.",
           "details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 1 currently"}]}}
    apf = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "Too many requests, please try again later.",
           "details": {"retryAfterSeconds": 1}}
    assert refused_by_budget(pdb) is True
    assert refused_by_budget(apf) is False
    assert refused_by_budget({}, "Cannot evict pod as it would violate the pod's disruption budget.") is True
    assert refused_by_budget(None) is False


def test_the_local_api_server_sends_the_disruption_budget_cause(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pod("guarded", x["node"], labels={"app": "guarded"})
    d.pdb("hold", "guarded", max_unavailable=0)
    req = urllib.request.Request(f"{d.w.url}/api/v1/namespaces/default/pods/guarded/eviction", method="POST",
                                 data=json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                                                  "metadata": {"name": "guarded", "namespace": "default"}}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req)
        raise AssertionError("eviction accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 429
        status = json.loads(e.read())
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget" and "hold" in status["details"]["causes"][0]["message"]
    assert refused_by_budget(status)


def test_api_server_throttling_is_not_reported_as_a_pdb(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.request(x)
    d.w.server.add_fault(status=429, times=1, method="POST", path=r"/pods/[^/]+/eviction$", retry_after=3,
                         message="Too many requests, please try again later.")
    assert d.finalize(x) == "draining"
    blocked = d.status(x)["blocked"]
    assert blocked and all(w == "API server throttling (429, Retry-After 3s)" for w in blocked.values()), blocked
    assert not any("PDB" in w or "PodDisruptionBudget" in w for w in blocked.values())
    kinds = [k for k, _m, _f in d.decisions]
    assert kinds.count("evict-throttled") == 1 and "evict-blocked" not in kinds
    assert len(d.w.server.requests("POST", r"/eviction$")) == 1     # backed off: no second eviction in this call
    errs = []
    second = d.finalize(x, errs)
    assert errs == [] and second in ("terminating", "deleted")        # the next call drains (no PDB was involved)
    assert sorted(d.evictions()) == ["app-0", "app-1"]


def test_a_pdb_429_is_still_a_pdb(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pod("guarded", x["node"], labels={"app": "guarded"})
    d.pdb("hold", "guarded", max_unavailable=0)
    d.request(x)
    assert d.finalize(x) == "draining"
    assert list(d.status(x)["blocked"].values()) == ["PDB default/hold (429)"]
    assert "evict-throttled" not in [k for k, _m, _f in d.decisions]
