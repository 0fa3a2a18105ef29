"""Balanced consolidation through the real consolidation handler (moto + the local Kubernetes API): the approved
move's Node gets ``ConsolidationApproved``, the rejected one's ``ConsolidationRejected`` with its score, the sweep's
response counts both (``scored``, the metrics), and ``disruption plan`` shows the score."""

import contextlib
import io
import json

from karpenter_lambda.cli.main import main

PRECIOUS = {"controller.kubernetes.io/pod-deletion-cost": str(2 ** 31 - 1)}   # eviction cost 10 (the clamp)
DND = {"karpenter.sh/do-not-disrupt": "true"}


def _annotate(d, x, annotations):
    for p in d.pods_on(x["nodeName"]):
        d.w.server.store.patch("pods", p["metadata"]["name"], {"metadata": {"annotations": annotations}},
                               namespace="default")


def _events(d, node_name, reason):
    return [e for e in d.w.server.store.list("events") if e.get("reason") == reason
            and (e.get("involvedObject") or {}).get("name") == node_name]


def _plan(d):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["--cluster", d.w.cluster, "disruption", "plan", "--json"]) == 0
    with contextlib.redirect_stdout(table := io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["--cluster", d.w.cluster, "disruption", "plan"]) == 0
    return {r["nodeClaim"]: r for r in json.loads(out.getvalue())["nodes"]}, table.getvalue()


def test_balanced_moves_are_scored_in_events_metrics_and_the_plan(make_world):
    d = make_world(policy="Balanced", consolidate_after="0s")
    a, b, c, e = d.nodes_with_pods([1, 1, 1, 1], cpu="1800m")   # four equal nodes
    d.put_pods(a, 1, cpu="500m")                                 # a: one small pod (it fits on c or e)
    d.put_pods(b, 3, cpu="600m")                                 # b: three pods that are dear to evict
    _annotate(d, b, PRECIOUS)
    for x in (c, e):                                             # c, e: held, nearly full
        d.put_pods(x, 1, cpu="1200m")
        _annotate(d, x, DND)
    rows, table = _plan(d)
    assert rows[a["name"]]["decision"] == "disrupt" and rows[a["name"]]["balancedScore"]["approved"]
    assert rows[a["name"]]["balancedScore"]["score"] > 2 and "balanced score" in rows[a["name"]]["detail"]
    assert rows[c["name"]]["balancedScore"] is None
    assert "SCORE" in table.splitlines()[0] and ">=0.50" in table

    seen_approved = seen_rejected = False
    for _ in range(8):
        out = d.tick(30, "consolidation")["consolidation"]
        for s in out.get("scored") or []:
            seen_approved |= s["decision"] == "approved" and s["nodeClaims"] == [a["name"]]
            seen_rejected |= s["decision"] == "rejected" and s["nodeClaims"] == [b["name"]]
        if seen_rejected and a["name"] not in d.alive():
            break
    assert seen_approved and seen_rejected
    assert a["name"] not in d.alive() and {b["name"], c["name"], e["name"]} <= d.alive()
    (approved,) = _events(d, a["nodeName"], "ConsolidationApproved")
    assert approved["message"].startswith("Underutilized: score ") and ">= 0.50" in approved["message"]
    (rejected,) = _events(d, b["nodeName"], "ConsolidationRejected")
    assert "< 0.50" in rejected["message"] and "even a delete" in rejected["message"]
    assert not _events(d, b["nodeName"], "Unconsolidatable")
    rows, table = _plan(d)
    assert rows[b["name"]]["decision"] == "blocked" and rows[b["name"]]["cause"] == "balanced score"
    assert not rows[b["name"]]["balancedScore"]["approved"] and "<0.50" in table
