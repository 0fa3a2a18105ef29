"""Karpenter's disruption decision Events on the candidate Node: ``DisruptionLaunching`` when its replacement is
launched, ``DisruptionTerminating`` when its deletion is requested, each with the disruption reason."""


def _node_events(d, node_name):
    """The Node's Events in the order they were written: the API lists by name, and Event names end in a random
    suffix (generateName), so order by resourceVersion (the list order made this test fail about half the time)."""
    events = [e for e in d.w.server.store.list("events")
              if (e.get("involvedObject") or {}).get("kind") == "Node" and e["involvedObject"].get("name") == node_name]
    return sorted(events, key=lambda e: int(e["metadata"]["resourceVersion"]))


def test_replace_writes_launching_then_terminating_on_the_candidate_node(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    (x,) = d.nodes_with_pods([1], cpu="6")
    d.put_pods(x, 1, cpu="500m")
    for _ in range(6):
        if d.tick(30, "consolidation")["consolidation"]["disrupted"]:
            break
    events = _node_events(d, x["nodeName"])
    reasons = [e["reason"] for e in events]
    assert "DisruptionLaunching" in reasons and "DisruptionTerminating" in reasons, reasons
    assert reasons.index("DisruptionLaunching") < reasons.index("DisruptionTerminating")
    launching = next(e for e in events if e["reason"] == "DisruptionLaunching")
    terminating = next(e for e in events if e["reason"] == "DisruptionTerminating")
    assert launching["message"] == "Launching NodeClaim: Underutilized" and launching["type"] == "Normal"
    assert terminating["message"] == "Disrupting Node: Underutilized"
    assert reasons.count("DisruptionTerminating") == 1


def test_delete_writes_only_terminating(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    gone = None
    for _ in range(6):
        dis = d.tick(30, "consolidation")["consolidation"]["disrupted"]
        if dis:
            gone = dis[0]["nodeClaim"]
            break
    node = {a["name"]: a["nodeName"], b["name"]: b["nodeName"]}[gone]
    reasons = [e["reason"] for e in _node_events(d, node)]
    assert reasons.count("DisruptionTerminating") == 1 and "DisruptionLaunching" not in reasons, reasons
