import pytest

from karpenter_lambda.sim.world import World, scenario_manifests
from termination.conftest import held_nodes


@pytest.fixture
def world():
    with World(scenario_manifests()) as w:
        yield w
        held = held_nodes(w)   # no Node left holding karpenter.sh/termination without a NodeClaim to finish it
    assert held == [], held
