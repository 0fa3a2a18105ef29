import pytest

from karpenter_lambda.adapters.kube.client import KubeClient
from karpenter_lambda.sim.kubeapi import KubeAPIServer


@pytest.fixture
def server():
    srv = KubeAPIServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def kc(server):
    c = KubeClient.from_host(server.url, backoff_base=0.001, backoff_cap=0.01)
    yield c
    c.close()
