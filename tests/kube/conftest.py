import pytest

from karpenter_lambda.adapters.kube.client import KubeClient


@pytest.fixture
def server(kube_api_server):
    return kube_api_server


@pytest.fixture
def kc(server):
    c = KubeClient.from_host(server.url, backoff_base=0.001, backoff_cap=0.01)
    yield c
    c.close()
