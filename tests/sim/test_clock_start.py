"""The simulator's clock starts on a whole second when no Scenario gives a start time: Kubernetes and EC2 stamp
whole seconds, so a fraction of the real start would shift every timer computed back from a stamp (a NodeClaim's
expiry) by a different amount in every run; the same input then gives the same event times."""

from __future__ import annotations

import types

import yaml

from karpenter_lambda.sim import clock as clock_mod
from karpenter_lambda.sim.clock import VirtualClock
from karpenter_lambda.sim.simulator import Simulation

from manifests import nodeclass, nodepool, to_yaml, workload

WEB = workload("web", {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m"}}}]},
               replicas=1)


def _wall(monkeypatch, now: float) -> None:
    monkeypatch.setattr(clock_mod, "time", types.SimpleNamespace(time=lambda: now))


def test_the_default_start_is_a_whole_second(monkeypatch):
    _wall(monkeypatch, 1_765_000_000.489)
    assert VirtualClock().start == 1_765_000_000.0
    assert VirtualClock(start=12.5).start == 12.5   # a given start is kept


def _events(tmp_path, monkeypatch, wall: float) -> list[tuple[float, str]]:
    _wall(monkeypatch, wall)
    (tmp_path / "pools.yaml").write_text(to_yaml(nodepool(expire_after="20m"), nodeclass()))
    (tmp_path / "work.yaml").write_text(yaml.safe_dump(WEB))
    res = Simulation([tmp_path / "pools.yaml", tmp_path / "work.yaml"], until=24 * 60.0).run()
    return [(round(e.time, 3), e.type) for e in res.events]


def test_runs_started_at_different_fractions_of_a_second_give_the_same_event_times(tmp_path, monkeypatch):
    first = _events(tmp_path, monkeypatch, 1_765_000_000.489)
    second = _events(tmp_path, monkeypatch, 1_765_000_100.15)
    assert ("NodeClaimDisrupted" in {t for _, t in first})   # the node expired and was replaced
    assert first == second
