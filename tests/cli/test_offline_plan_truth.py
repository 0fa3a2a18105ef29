"""`disruption plan --state DIR` tells the truth (issue 28, item 5): on a state saved by `simulate --save-state`, it
decides what the run's own next sweeps decide.

Each test runs a short simulation in-process and, at its end (the `Done` event, where `simulate --save-state` saves),
saves the state, asks the live world for the plan (the same preview, on the run's own moto and Kubernetes API) and
then runs the next drift and consolidation sweeps for real.  The offline plan, served from the saved files alone,
must equal the live plan row for row, and each node's decision (disrupt / blocked / in flight / keep, with its
reason and cause) must be what those real sweeps did.

The bug it holds down: the served moto was seeded afresh, so an AMI released by a Scenario step was missing and
every node launched from it showed `AMIDrift` offline, although the run never drifted it.
"""

import contextlib
import io
import json

import pytest
import yaml

from karpenter_lambda.adapters.store.ledger import DisruptionLedger
from karpenter_lambda.api.times import format_time
from karpenter_lambda.cli.main import main
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.controllers import environment
from karpenter_lambda.controllers.disrupt import DisruptionSweep
from karpenter_lambda.sim.simulator import Simulation
from karpenter_lambda.sim.state_io import WORLD_KEYS, save_state, serve_state

MANIFESTS = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-truth
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: truth}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: truth}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
           labelSelector: {matchLabels: {app: web}}}
      containers: [{name: web, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def _scenario(*steps: str) -> str:
    return ("apiVersion: karpenter-lambda.io/v1alpha1\nkind: Scenario\nmetadata: {name: truth}\nspec:\n  steps:\n"
            + "".join(f"    - {s}\n" for s in steps))


def _simulate(tmp_path, scenario: str | None, until: float | None, files: list | None = None):
    """Run the simulation; at its end save the state and record the live plan and what the next sweeps do.
    ``files``: the input (default: MANIFESTS and ``scenario``)."""
    if files is None:
        (tmp_path / "m.yaml").write_text(MANIFESTS)
        files = [tmp_path / "m.yaml"]
    if scenario:
        (tmp_path / "s.yaml").write_text(scenario)
        files.append(tmp_path / "s.yaml")
    saved = tmp_path / "saved"
    seen: dict = {}

    def on_event(ev):
        if ev.type != "Done":
            return
        save_state(sim, saved)
        env = environment.get_environment()
        seen["resolved"] = _resolution(env)
        seen["subnets"] = {s["SubnetId"]: (s["AvailabilityZone"], s["AvailableIpAddressCount"],
                                           {t["Key"]: t["Value"] for t in s.get("Tags") or []})
                           for s in env.ec2.describe_subnets()["Subnets"] if not s.get("DefaultForAz")}
        seen["live"] = DisruptionSweep.from_environment(env, "consolidation").preview()
        ledger = DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table)
        seen["inFlight"] = {n: e.reason for n, e in ledger.entries().items()}
        # the explanation memory (status.disruptionBlocked, once per node and cause) is cleared, so the sweeps
        # report every blocked node's cause, not only the new ones; no decision reads it
        for nc in env.store.list("NodeClaim"):
            if nc.status.get("disruptionBlocked"):
                env.store.update("NodeClaim", nc.name, lambda o: (o.status.pop("disruptionBlocked", None), o)[1])
        seen["sweeps"] = [DisruptionSweep.from_environment(env, kind).sweep().to_dict()
                          for kind in ("drift", "consolidation")]

    sim = Simulation(files, until=until, cluster="truth", on_event=on_event)
    result = sim.run()
    assert "live" in seen, "the simulation never finished"
    return saved, result, seen


def _resolution(env) -> dict:
    """The EC2NodeClass as the cloud provider resolves it now (subnets, security groups, AMIs, conditions)."""
    resolved, problem = AWSCloudProvider.from_environment(env).resolve(env.store.get("EC2NodeClass", "default"))
    status = resolved.status_patch()
    for c in status["conditions"]:
        c.pop("lastTransitionTime", None)      # the resolver stamps the wall clock
    return {"status": status, "problem": problem}


def _offline(saved) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--state", str(saved), "disruption", "plan", "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def _sweep_decisions(seen) -> dict[str, tuple]:
    """Per NodeClaim, what the real sweeps did: (decision, reason, cause), in the plan's terms."""
    out: dict[str, tuple] = {n: ("in flight", r, "") for n, r in seen["inFlight"].items()}
    for report in seen["sweeps"]:
        assert not report["errors"], report["errors"]
        for d in report["proposed"] + report["disrupted"]:
            out.setdefault(d["nodeClaim"], ("disrupt", d["reason"], ""))
        for b in report["blocked"]:
            out.setdefault(b["nodeClaim"], ("blocked", b["reason"], b["cause"]))
    return out


def _nodeclaims(saved) -> list[dict]:
    items = json.loads((saved / "state.json").read_text())["items"]
    return [{"name": json.loads(i["metadata"]["S"])["name"], "status": json.loads(i["status"]["S"])}
            for i in items if (i.get("kind") or {}).get("S") == "NodeClaim"]


def _check_truth(rows: list[dict], seen) -> None:
    assert rows == seen["live"]          # offline == the live world at the save point, row for row
    did = _sweep_decisions(seen)
    for r in rows:
        want = did.get(r["nodeClaim"], ("keep", "", ""))
        assert (r["decision"], r["reason"], r["cause"]) == want, (r, want)


def test_no_drift_in_the_run_is_no_drift_offline(tmp_path):
    # the AMI is released before anything launches: every node runs it, and the run never drifts one
    saved, result, seen = _simulate(tmp_path, _scenario("{at: 0s, releaseAMI: {family: al2023}}"), until=100)
    names = {c["name"] for c in result.to_dict()["nodeClaims"]}
    assert len(names) >= 2
    images = {i["ImageId"]: i["Name"] for i in json.loads((saved / "ec2.json").read_text())["images"]}
    stamped = {c["name"]: c["status"]["imageID"] for c in _nodeclaims(saved)}
    assert set(stamped) == names and all("v20250102" in images[i] for i in stamped.values()), stamped
    plan = _offline(saved)
    assert plan["time"] == format_time(json.loads((saved / "state.json").read_text())["time"])
    rows = plan["nodes"]
    assert {r["nodeClaim"] for r in rows} == names
    assert all(r["reason"] != "Drifted" for r in rows), rows
    _check_truth(rows, seen)
    with serve_state(saved):         # the EC2NodeClass resolves offline exactly as in the run
        env = environment.get_environment()
        assert _resolution(env) == seen["resolved"]
        subnets = {s["SubnetId"]: (s["AvailabilityZone"], s["AvailableIpAddressCount"], s["Tags"])
                   for s in env.ec2.describe_subnets(SubnetIds=list(seen["subnets"]))["Subnets"]}
        subnets = {k: (z, n, {t["Key"]: t["Value"] for t in tags}) for k, (z, n, tags) in subnets.items()}
        assert subnets == seen["subnets"]     # ids, zones, tags and the free addresses the run's instances left
    assert seen["resolved"]["status"]["amis"] and seen["resolved"]["status"]["subnets"]


def test_a_state_saved_before_the_world_was_still_loads(tmp_path):
    saved, result, seen = _simulate(tmp_path, None, until=100)
    ec2 = json.loads((saved / "ec2.json").read_text())
    state = json.loads((saved / "state.json").read_text())
    for key in (*WORLD_KEYS, "iamRoles", "instanceProfiles"):
        del ec2[key]
    del state["cacheItems"], state["cacheTable"]
    (saved / "ec2.json").write_text(json.dumps(ec2))
    (saved / "state.json").write_text(json.dumps(state))
    rows = _offline(saved)["nodes"]     # seeded as simulate seeds, the saved ids mapped: no release, so no drift
    assert {r["nodeClaim"] for r in rows} == {c["name"] for c in result.to_dict()["nodeClaims"]} != set()
    assert all(r["reason"] != "Drifted" for r in rows), rows


def _relabelled_nodepool() -> str:
    np = next(yaml.safe_load_all(MANIFESTS))
    np["spec"]["template"].setdefault("metadata", {})["labels"] = {"team": "platform"}
    return json.dumps(np)


@pytest.mark.parametrize("step, kind", [
    ("{at: 150s, releaseAMI: {family: al2023}}", "AMIDrift"),      # al2023@latest resolves to a new image
    (f"{{at: 150s, apply: {_relabelled_nodepool()}}}", "NodePoolDrifted"),   # the NodePool template changed
], ids=["ami-release", "nodepool-template"])
def test_a_drift_the_run_made_is_reported_offline(tmp_path, step, kind):
    # the nodes are up by 150 s; the step makes them drift, and the state is saved before the drift sweep (every 60 s)
    # acts on it: offline, as in the run's next drift sweep, the drift is what is done first
    saved, result, seen = _simulate(tmp_path, _scenario(step), until=170)
    rows = _offline(saved)["nodes"]
    drifted = [r for r in rows if r["reason"] == "Drifted"]
    # as many disrupted as the budget (10%) allows, the others blocked by it (drift rolls at the budget's pace)
    disrupt = [r for r in drifted if r["decision"] == "disrupt"]
    assert disrupt and all(r["detail"].startswith(kind) for r in disrupt), rows
    assert all(r["decision"] == "blocked" and r["cause"] == "budget" for r in drifted if r not in disrupt), rows
    _check_truth(rows, seen)


def test_nodes_the_next_sweep_will_not_look_at_are_said_so(tmp_path):
    """The consolidation sweep carries out its first method with a decision and looks no further (emptiness before
    Underutilized): the underused nodes are not evaluated by the next sweep.  The plan said "nothing to gain" of them
    while the budget the Empty decision takes would block them (the audit's Empty / Underutilized budgets)."""
    from pathlib import Path
    data = Path(__file__).parent.parent / "sim" / "data"
    saved, _, seen = _simulate(tmp_path, None, 5 * 60 + 45, files=[data / "empty_first_pool.yaml",
                                                                   data / "empty_first_work.yaml"])
    rows = _offline(saved)["nodes"]
    _check_truth(rows, seen)
    assert [r["reason"] for r in rows if r["decision"] == "disrupt"] == ["Empty"]
    kept = [r for r in rows if r["decision"] == "keep"]
    assert kept and all("not looked at by the next sweep, which carries out Empty first" in r["detail"] for r in kept)
