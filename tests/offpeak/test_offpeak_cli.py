"""`karpenter-lambda offpeak status` and `offpeak run [--dry-run]` against moto + the local Kubernetes API."""

from __future__ import annotations

import json

from karpenter_lambda.cli.main import main

from .offpeak_world import NODEPOOL, OffPeakWorld, deployment, schedule

BODY = """
  workloads:
    - namespaces: [dev]
      replicas: 0
  nodePools:
    - name: default
      limits: {cpu: "16"}
"""


def _cli(o, capsys, *args) -> tuple[int, str, str]:
    code = main(["--cluster", o.w.cluster, *args, "--kube-endpoint", o.w.url])
    out, err = capsys.readouterr()
    return code, out, err


def test_status_before_during_and_after_a_window(capsys):
    with OffPeakWorld(NODEPOOL + "---" + schedule(BODY), "2027-01-12T12:00:00Z") as o:
        o.create(deployment("web", replicas=3))
        code, out, _ = _cli(o, capsys, "offpeak", "status", "--json")
        assert code == 0
        doc = json.loads(out)
        (s,) = doc["schedules"]
        assert s["name"] == "nights" and s["active"] is False and s["window"] is None
        assert s["next"]["start"] == "2027-01-12T19:00:00Z" and s["next"]["startLocal"].startswith("2027-01-12T20:00:00+01:00")
        assert s["next"]["end"] == "2027-01-13T07:00:00Z"
        o.run("2027-01-12T19:30:00Z")
        code, out, _ = _cli(o, capsys, "offpeak", "status", "nights", "--json")
        (s,) = json.loads(out)["schedules"]
        assert s["active"] is True and s["window"]["endLocal"].startswith("2027-01-13T08:00:00+01:00")
        holds = {h["object"]: h for h in s["holds"]}
        assert holds["Deployment/dev/web"]["originalReplicas"] == 3 and holds["Deployment/dev/web"]["target"] == 0
        assert holds["NodePool/default"]["original"]["limits"] == {"cpu": "1000"}
        code, out, _ = _cli(o, capsys, "offpeak", "status")
        assert code == 0
        lines = out.splitlines()
        assert lines[0].split() == ["NAME", "TIMEZONE", "ACTIVE", "WINDOW", "(LOCAL)", "NEXT", "(LOCAL)", "NEXT", "(UTC)", "HOLDS"]
        assert "nights" in lines[1] and "Europe/Berlin" in lines[1] and " yes " in lines[1]
        assert any("Deployment/dev/web" in ln and "3 replicas" in ln for ln in lines)
        code, _, err = _cli(o, capsys, "offpeak", "status", "mornings")
        assert code == 1 and "no OffPeakSchedule named 'mornings'" in err


def test_run_dry_run_shows_the_changes_and_changes_nothing(capsys):
    with OffPeakWorld(NODEPOOL + "---" + schedule(BODY), "2027-01-12T18:00:00Z") as o:
        o.create(deployment("web", replicas=3))
        o.create(deployment("api", replicas=2))
        o.at("2027-01-12T19:10:00Z")
        code, out, _ = _cli(o, capsys, "offpeak", "run", "--dry-run")
        assert code == 0
        assert "Deployment/dev/web" in out and "scale-down" in out and "nothing was changed (--dry-run)" in out
        assert "NodePool/default" in out
        assert o.replicas("web") == 3 and o.replicas("api") == 2 and o.records() == {}
        assert o.store.get("NodePool", "default").spec["limits"] == {"cpu": "1000"}
        code, out, _ = _cli(o, capsys, "offpeak", "run", "--dry-run", "--json")
        doc = json.loads(out)
        assert doc["dryRun"] is True
        assert {(c["object"], c["from"], c["to"]) for c in doc["scaled"]} == {("Deployment/dev/web", 3, 0),
                                                                             ("Deployment/dev/api", 2, 0)}
        # now for real, then a dry run has nothing left to do
        code, out, _ = _cli(o, capsys, "offpeak", "run", "nights")
        assert code == 0 and o.replicas("web") == 0 and "3 objects changed" in out
        assert o.store.get("NodePool", "default").spec["limits"] == {"cpu": "16"}
        code, out, _ = _cli(o, capsys, "offpeak", "run", "--dry-run", "--json")
        assert json.loads(out)["scaled"] == []
        code, _, err = _cli(o, capsys, "offpeak", "run", "nope", "--json")
        assert code == 1
