"""Fixtures: a simulated world (moto + local Kubernetes API + the real handlers) per test."""

import pytest

from karpenter_lambda.sim.world import World, scenario_manifests


@pytest.fixture
def world():
    with World(scenario_manifests()) as w:
        yield w


@pytest.fixture
def world_factory():
    worlds = []

    def make(**kw):
        w = World(scenario_manifests(**kw))
        worlds.append(w)
        return w.__enter__()

    yield make
    for w in reversed(worlds):
        w.__exit__(None, None, None)
