import pytest

from karpenter_lambda.sim.world import World

from .disruption_world import DisruptionWorld, manifests


@pytest.fixture
def make_world():
    """make_world(**manifest options) -> DisruptionWorld (closed at the end of the test)."""
    worlds = []

    def make(**kw) -> DisruptionWorld:
        w = World(manifests(**kw))
        w.__enter__()
        worlds.append(w)
        return DisruptionWorld(w)

    yield make
    for w in reversed(worlds):
        w.__exit__(None, None, None)
