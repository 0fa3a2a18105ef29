"""`karpenter-lambda disruption plan` against the simulated environment (moto + the local Kubernetes API): it
explains each node and changes nothing."""

import contextlib
import io
import json

from karpenter_lambda.cli.main import main


def _plan(d, *extra):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--cluster", d.w.cluster, "disruption", "plan", *extra])
    return code, out.getvalue(), err.getvalue()


def test_plan_explains_every_node_and_changes_nothing(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b, e = d.nodes_with_pods([1, 1, 0], cpu="500m")
    d.tick(30, "consolidation")          # the pod-event clock starts; nothing decided yet for a and b? (emptiness may)
    d.w.server.store.patch("pods", d.pods_on(a["nodeName"])[0]["metadata"]["name"],
                           {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, namespace="default")
    before = {nc.name: nc.to_dict() for nc in d.w.store.list("NodeClaim")}
    code, out, err = _plan(d, "--json")
    assert code == 0, err
    rows = {r["nodeClaim"]: r for r in json.loads(out)["nodes"]}
    assert set(rows) == set(before)
    assert rows[a["name"]]["decision"] == "blocked" and rows[a["name"]]["cause"] == "do-not-disrupt"
    assert "do-not-disrupt pod default/" in rows[a["name"]]["detail"]
    assert rows[e["name"]]["decision"] in ("in flight", "disrupt") and rows[e["name"]]["reason"] == "Empty"
    assert rows[b["name"]]["decision"] in ("keep", "blocked", "disrupt")
    assert {nc.name: nc.to_dict() for nc in d.w.store.list("NodeClaim")} == before      # nothing written
    code, text, _ = _plan(d)
    assert code == 0 and "NODECLAIM" in text.splitlines()[0] and "nothing was changed" in text
    assert a["name"] in text and "do-not-disrupt" in text


def test_plan_says_what_to_fix_when_the_state_cannot_be_read(make_world, monkeypatch):
    d = make_world()
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "no-such-table")
    code, out, err = _plan(d)
    assert code == 1 and "cannot read the cluster state" in err and "--cluster" in err


def test_plan_names_each_cause(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s",
                   budgets='[{nodes: "0", reasons: [Drifted]}, {nodes: "100%"}]')
    a, b, c = d.nodes_with_pods([1, 1, 1], cpu="1500m")     # each full enough: no move is cheaper
    d.put_pods(a, 1, cpu="1500m", app="guarded")
    d.w.server.store.create("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}}, "default")

    def drift(np):
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "x"
    d.w.store.update("NodePool", "default", drift)
    code, out, err = _plan(d, "--json")
    assert code == 0, err
    rows = {r["nodeClaim"]: r for r in json.loads(out)["nodes"]}
    assert rows[a["name"]]["cause"] == "PDB" and "default/guard" in rows[a["name"]]["detail"]
    for x in (b, c):   # drifted but the Drifted budget is 0; consolidation: no cheaper replacement
        assert rows[x["name"]]["decision"] == "blocked"
        assert rows[x["name"]]["cause"] == "budget" and "Drifted 0 of 0 left" in rows[x["name"]]["detail"]
