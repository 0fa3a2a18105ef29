"""`simulate`'s timers and event guarantees (issue 20, item 4).

* an explicit ``--until`` always wins over the safety limit (a window at hour 7 of an 8 h run starts and ends);
* without ``--until`` the run does not stop as "nothing changed" while a timer will still change something: a
  disruption budget window that blocks a pending disruption, an off-peak window that will end;
* every launch is a ``NodeClaimLaunched`` event (replacements too, with ``replaces`` and ``reason``);
* one ``NodeClaimDisrupted`` per NodeClaim per disruption (a terminated instance too).

Small scenarios: one or two nodes each, quiet stretches skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
"""


def _nodepool(capacity: str = "on-demand", disruption: str = "") -> str:
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity}]}}
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
{disruption}"""


def _deployment(name: str, replicas: int, namespace: str = "default", spread: bool = False) -> dict:
    spec = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}
    if spread:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _scenario(start: str, steps: list[dict]) -> dict:
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"startTime": start, "steps": steps}}


def _offpeak(schedule: str, duration: str, namespace: str = "dev") -> dict:
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "OffPeakSchedule", "metadata": {"name": "nights"},
            "spec": {"timeZone": "UTC", "schedule": schedule, "duration": duration,
                     "workloads": [{"namespaces": [namespace], "replicas": 0}]}}


def _run(tmp_path: Path, *docs, until: float | None = None) -> dict:
    files = []
    for i, doc in enumerate(docs):
        f = tmp_path / f"in{i}.yaml"
        f.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        files.append(f)
    return Simulation(files, until=until, progress=lambda m: None).run().to_dict()


def _events(d: dict, kind: str) -> list[dict]:
    return [e for e in d["events"] if e["type"] == kind]


def _assert_event_guarantees(d: dict) -> None:
    """Every NodeClaim the run knows of was launched exactly once (a NodeClaimLaunched event), and disrupted at
    most once (a NodeClaimDisrupted event)."""
    launched = Counter(e["object"].split("/", 1)[1] for e in _events(d, "NodeClaimLaunched"))
    assert all(n == 1 for n in launched.values()), launched
    disrupted = Counter(e["object"].split("/", 1)[1] for e in _events(d, "NodeClaimDisrupted"))
    assert all(n == 1 for n in disrupted.values()), disrupted
    known = {c["name"] for c in d["nodeClaims"]} | set(disrupted)
    known |= {r for e in _events(d, "NodeClaimDisrupted") for r in e.get("replacements") or []}
    assert known <= set(launched), known - set(launched)


def test_until_longer_than_the_safety_limit_is_honoured(tmp_path):
    """A window starting at hour 7 of an `--until 8h` run starts and ends (the 6 h safety limit used to win)."""
    d = _run(tmp_path, _nodepool() + "---" + NODECLASS, _deployment("web", 1, "dev"),
             _offpeak("0 7 * * *", "30m"), _scenario("2027-01-12T00:00:00Z", []), until=8 * 3600.0)
    assert [e["time"] for e in _events(d, "OffPeakStarted")] == [7 * 3600.0]
    assert [e["time"] for e in _events(d, "OffPeakEnded")] == [7.5 * 3600]
    assert d["stoppedBecause"] == "reached --until 8h00m00.0s"
    assert d["simulatedSeconds"] == 8 * 3600.0
    (night,) = d["offpeak"]
    assert night["simulatedToEnd"] is True and night["windowStart"] == 7 * 3600.0
    assert d["pods"] == {"total": 1, "bound": 1}
    _assert_event_guarantees(d)


def test_a_scenario_step_after_six_hours_runs(tmp_path):
    """Without --until, a timer due after 6 h is still a timer: the step runs and the run goes on after it."""
    d = _run(tmp_path, _nodepool() + "---" + NODECLASS, _deployment("web", 1),
             _scenario("2027-01-12T00:00:00Z", [{"at": "7h", "scale": {"kind": "Deployment", "namespace": "default",
                                                                       "name": "web", "replicas": 2}}]))
    assert [e["time"] for e in _events(d, "ScenarioStep")] == [7 * 3600.0]
    assert d["pods"] == {"total": 2, "bound": 2}
    assert d["stoppedBecause"].startswith("nothing changed")
    _assert_event_guarantees(d)


BUDGET_WINDOW = """  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets: [{nodes: "0", schedule: "0 9 * * *", duration: 8h}]
"""


def test_a_budget_window_blocking_a_disruption_is_waited_for(tmp_path):
    """09:00-17:00 UTC no node may be disrupted: the empty node left by a scale-down at 10:03 is removed at 17:00,
    not abandoned by a run that stops as "nothing changed" at 10:05."""
    d = _run(tmp_path, _nodepool(disruption=BUDGET_WINDOW) + "---" + NODECLASS, _deployment("web", 2, spread=True),
             _scenario("2027-01-12T10:00:00Z", [{"at": "3m", "scale": {"kind": "Deployment", "namespace": "default",
                                                                       "name": "web", "replicas": 1}}]))
    blocked = [e for e in _events(d, "DisruptionBlocked") if e["reason"] == "budget"]
    assert blocked and all(e["time"] < 600 for e in blocked)
    (changed,) = _events(d, "DisruptionBudgetChanged")
    assert changed["time"] == 7 * 3600.0 and changed["nodePool"] == "default" and changed["reason"] == "Empty"
    (disrupted,) = _events(d, "NodeClaimDisrupted")
    assert disrupted["reason"] == "Empty" and 7 * 3600 <= disrupted["time"] <= 7 * 3600 + 300
    assert len(d["nodeClaims"]) == 1 and d["pods"] == {"total": 1, "bound": 1}
    assert d["stoppedBecause"].startswith("nothing changed")
    assert d["simulatedSeconds"] < 7 * 3600 + 1800
    _assert_event_guarantees(d)


def test_an_offpeak_window_started_during_the_run_is_run_to_its_end(tmp_path):
    """Hourly windows of 20 minutes; the run goes on past the first one (a step at 1h05m): the second window
    starts at its edge and the run does not stop before it ends."""
    d = _run(tmp_path, _nodepool() + "---" + NODECLASS, _deployment("web", 1, "dev"), _deployment("shop", 1),
             _offpeak("0 * * * *", "20m"),
             _scenario("2027-01-12T00:00:00Z", [{"at": "65m", "scale": {"kind": "Deployment", "namespace": "default",
                                                                        "name": "shop", "replicas": 2}}]))
    assert [e["time"] for e in _events(d, "OffPeakStarted")] == [0.0, 3600.0]
    assert [e["time"] for e in _events(d, "OffPeakEnded")] == [1200.0, 4800.0]
    assert [(o["windowStart"], o["simulatedToEnd"]) for o in d["offpeak"]] == [(0.0, True), (3600.0, True)]
    assert d["pods"] == {"total": 3, "bound": 3}
    _assert_event_guarantees(d)


def test_an_interruption_replacement_is_a_launch_event(tmp_path):
    d = _run(tmp_path, _nodepool("spot", "  disruption: {consolidateAfter: Never}\n") + "---" + NODECLASS,
             _deployment("web", 1),
             _scenario("2027-01-12T00:00:00Z", [{"at": "3m", "interrupt": {"kind": "SpotInterruption",
                                                                           "nodePool": "default", "count": 1}}]))
    (disrupted,) = _events(d, "NodeClaimDisrupted")
    (replacement,) = disrupted["replacements"]
    launches = {e["object"]: e for e in _events(d, "NodeClaimLaunched")}
    assert len(launches) == 2
    launch = launches[f"nodeclaim/{replacement}"]
    assert launch["replaces"] == [disrupted["object"].split("/", 1)[1]] and launch["reason"] == "SpotInterrupted"
    assert launch["time"] == 180.0 and d["events"].index(launch) < d["events"].index(disrupted)
    assert "spot" in launch["message"] and "$" in launch["message"]
    assert [c["name"] for c in d["nodeClaims"]] == [replacement]
    _assert_event_guarantees(d)


def test_a_drift_replacement_is_a_launch_event(tmp_path):
    d = _run(tmp_path, _nodepool() + "---" + NODECLASS, _deployment("web", 1),
             _scenario("2027-01-12T00:00:00Z", [{"at": "3m", "releaseAMI": {"family": "al2023"}}]))
    (disrupted,) = _events(d, "NodeClaimDisrupted")
    assert disrupted["reason"] == "Drifted"
    (replacement,) = disrupted["replacements"]
    (launch,) = [e for e in _events(d, "NodeClaimLaunched") if e["object"] == f"nodeclaim/{replacement}"]
    assert launch["replaces"] == [disrupted["object"].split("/", 1)[1]] and launch["reason"] == "Drifted"
    assert launch["time"] < disrupted["time"]
    assert [c["name"] for c in d["nodeClaims"]] == [replacement]
    _assert_event_guarantees(d)


def test_a_terminated_instance_is_one_disruption(tmp_path):
    d = _run(tmp_path, _nodepool() + "---" + NODECLASS, _deployment("web", 1),
             _scenario("2027-01-12T00:00:00Z", [{"at": "3m", "interrupt": {"kind": "StateChange", "state": "terminated",
                                                                           "nodePool": "default", "count": 1}}]))
    (received,) = _events(d, "InterruptionReceived")
    disrupted = [e for e in _events(d, "NodeClaimDisrupted") if e["object"] == received["object"]]
    assert len(disrupted) == 1, disrupted
    assert disrupted[0]["time"] == 180.0
    assert [e["object"] for e in _events(d, "NodeClaimDeleted")] == [received["object"]]
    assert d["pods"] == {"total": 1, "bound": 1}
    _assert_event_guarantees(d)


def test_the_safety_limit_still_ends_a_run_without_until(tmp_path):
    """Without --until the safety limit counts from the last timer due (here the start): a 1-minute limit ends the
    run while the node is still coming up; an explicit --until goes past it."""
    files = [tmp_path / "np.yaml", tmp_path / "web.yaml"]
    files[0].write_text(_nodepool() + "---" + NODECLASS)
    files[1].write_text(json.dumps(_deployment("web", 1)))
    d = Simulation(files, max_time=60.0, progress=lambda m: None).run().to_dict()
    assert d["stoppedBecause"] == "stopped at the 1m00.0s safety limit (no timer due since +0.0s)"
    assert d["simulatedSeconds"] <= 60.0
    d = Simulation(files, max_time=60.0, until=120.0, progress=lambda m: None).run().to_dict()
    assert d["stoppedBecause"] == "reached --until 2m00.0s" and d["simulatedSeconds"] == 120.0
    assert d["pods"] == {"total": 1, "bound": 1}


def test_back_to_back_offpeak_windows_do_not_keep_a_run_going(tmp_path):
    """Windows found while running (here: always one, every 30 minutes) do not move the safety limit."""
    files = [tmp_path / "in.yaml"]
    files[0].write_text("\n---\n".join([_nodepool(), NODECLASS, json.dumps(_deployment("web", 1, "dev")),
                                      json.dumps(_offpeak("*/30 * * * *", "30m")),
                                      json.dumps(_scenario("2027-01-12T00:00:00Z", []))]))
    d = Simulation(files, max_time=3600.0, progress=lambda m: None).run().to_dict()
    assert d["stoppedBecause"].startswith("stopped at the 1h00m00.0s safety limit")
    assert d["simulatedSeconds"] <= 1800 + 3600
