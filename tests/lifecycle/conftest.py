import pytest

from karpenter_lambda.sim.world import World, scenario_manifests


@pytest.fixture
def world():
    with World(scenario_manifests()) as w:
        yield w
