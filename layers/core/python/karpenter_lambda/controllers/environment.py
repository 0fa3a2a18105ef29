"""What a function needs to act, built once per process (Lambda container, simulator run, test).

``get_environment()`` builds from the environment variables (``runtime.Config``): boto3 clients (standard
retries, connect/read timeouts: :attr:`Environment.botocore_config`),
the DynamoDB store, the unavailable-offerings cache, the launch claims, the cluster's EKS
description (endpoint, CA, Kubernetes version, service CIDR) and a kubernetes client with an EKS
bearer token.  Construction is lazy and cached: a warm invocation reuses everything.
``reset()`` drops the cache (the simulator and tests call it between runs).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property

from ..adapters import store as state_store
from ..adapters.aws import clients
from ..adapters.aws.pricing import pricing_api_region
from ..adapters.aws.pricing_cache import PriceCache
from ..adapters.aws.unavailable import UnavailableOfferings
from ..adapters.kube.client import KubeClient
from ..adapters.kube.token import TokenProvider
from ..adapters.store.claims import LaunchClaims
from . import runtime


@dataclass
class ClusterDescription:
    name: str
    endpoint: str
    ca_b64: str
    version: str
    service_cidr: str | None = None
    ip_family: str = "ipv4"


@dataclass(eq=False)
class Environment:
    config: runtime.Config
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- AWS ---------------------------------------------------------------------------------
    @cached_property
    def session(self):
        return clients.make_session(self.config.region)

    @cached_property
    def botocore_config(self):
        """Every client's botocore settings: standard (or adaptive) retries, connect/read timeouts below the
        functions' timeouts (``runtime.Config.aws_*``)."""
        c = self.config
        return clients.botocore_config(c.aws_retry_mode, c.aws_max_attempts, c.aws_connect_timeout, c.aws_read_timeout)

    def client(self, service: str, **kwargs):
        return clients.make_client(self.session, service, self.botocore_config, self.config.endpoint_url, **kwargs)

    @cached_property
    def ec2(self):
        return self.client("ec2")

    @cached_property
    def ssm(self):
        return self.client("ssm")

    @cached_property
    def iam(self):
        return self.client("iam")

    @cached_property
    def eks(self):
        return self.client("eks")

    @cached_property
    def dynamodb(self):
        return self.client("dynamodb")

    @cached_property
    def pricing(self):
        """The Pricing API client (us-east-1, or cn-northwest-1 for China), None where it cannot be reached (GovCloud)."""
        api_region = pricing_api_region(self.config.region)
        if api_region is None:
            return None
        return self.client("pricing", region_name=api_region)

    @cached_property
    def price_cache(self):
        """Fetched on-demand/spot prices in the cache table (fresh 12 h / 1 h), shared by every invocation."""
        return PriceCache(self.dynamodb, self.config.cache_table, now=runtime.clock_proxy)

    @cached_property
    def store(self):
        return state_store.Store(self.config.cluster, table_name=self.config.state_table, region=self.config.region,
                     endpoint_url=self.config.endpoint_url,
                     clock=lambda: datetime.fromtimestamp(runtime.now(), tz=timezone.utc))

    @cached_property
    def unavailable(self):
        return UnavailableOfferings(table_name=self.config.cache_table, region=self.config.region,
                                    endpoint_url=self.config.endpoint_url, clock=runtime.clock_proxy,
                                    cluster_name=self.config.cluster, client=self.dynamodb)

    @cached_property
    def claims(self):
        return LaunchClaims(self.dynamodb, self.config.cluster, self.config.state_table, clock=runtime.clock_proxy)

    # -- the cluster ---------------------------------------------------------------------------
    @cached_property
    def cluster(self) -> ClusterDescription:
        c = self.eks.describe_cluster(name=self.config.cluster)["cluster"]
        net = c.get("kubernetesNetworkConfig") or {}
        return ClusterDescription(
            name=self.config.cluster,
            endpoint=self.config.kube_endpoint or c.get("endpoint") or "",
            ca_b64=(c.get("certificateAuthority") or {}).get("data", ""),
            version=os.environ.get("KARPENTER_LAMBDA_KUBERNETES_VERSION") or str(c.get("version") or ""),
            service_cidr=net.get("serviceIpv4Cidr") or net.get("serviceIpv6Cidr"),
            ip_family=net.get("ipFamily") or "ipv4",
        )

    @cached_property
    def kube(self):
        provider = TokenProvider(self.config.cluster, self.config.region, self.session)
        return KubeClient.from_endpoint(self.cluster.endpoint, self.cluster.ca_b64, provider.token)


_env: Environment | None = None
_env_lock = threading.Lock()


def get_environment(config: runtime.Config | None = None) -> Environment:
    global _env
    with _env_lock:
        if _env is None or (config is not None and _env.config != config):
            _env = Environment(config or runtime.Config.from_env())
        return _env


def reset() -> None:
    global _env
    with _env_lock:
        _env = None
