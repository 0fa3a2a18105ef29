import pytest

from karpenter_lambda.sim.world import World

from .interruption_world import InterruptionWorld, manifests


@pytest.fixture
def iw():
    with World(manifests()) as w:
        yield InterruptionWorld(w)


@pytest.fixture
def iw_factory():
    worlds = []

    def make(**kw):
        w = World(manifests(**kw))
        worlds.append(w)
        return InterruptionWorld(w.__enter__())

    yield make
    for w in reversed(worlds):
        w.__exit__(None, None, None)
