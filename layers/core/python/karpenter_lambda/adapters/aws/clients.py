"""boto3 sessions and clients for the functions: one session per process, every client with the same botocore
settings (standard or adaptive retries, connect/read timeouts below the functions' timeouts).

boto3 is imported here, not by the controllers (``import boto3`` costs ~0.45 s: only when a client is first made).
"""

from __future__ import annotations


_LOADERS: dict = {}


def share_service_models() -> None:
    """Parse each AWS service model once per process, not once per botocore session or client.

    - One botocore data loader per data path: boto3's session, pynamodb's session per thread and any other library's
      session each make a loader of their own, and the EC2 model alone takes about 0.1 s to parse. Loaders keep the
      parsed models in a cache and never change them, so sharing one is safe.
    - A client's API methods (one per operation: about 700 for EC2) are made once per service and reused by every
      later client of it. They depend only on the operation names (their docstrings are built lazily).

    Idempotent: it replaces ``botocore.session.create_loader`` and ``ClientCreator._create_methods`` once."""
    import botocore.client
    import botocore.session

    original = botocore.session.create_loader
    if getattr(original, "karpenter_lambda_shared", False):
        return

    def create_loader(search_path_string=None):
        loader = _LOADERS.get(search_path_string)
        if loader is None:
            loader = _LOADERS[search_path_string] = original(search_path_string)
        return loader

    create_methods = botocore.client.ClientCreator._create_methods
    methods: dict = {}

    def _create_methods(self, service_model):
        key = (service_model.service_name, tuple(service_model.operation_names))
        made = methods.get(key)
        if made is None:
            made = methods[key] = create_methods(self, service_model)
        return dict(made)   # the creating-client-class handlers add to it

    create_loader.karpenter_lambda_shared = True
    botocore.session.create_loader = create_loader
    botocore.client.ClientCreator._create_methods = _create_methods


def make_session(region: str):
    import boto3   # deferred: the cold-start cost is paid only by a function that makes a client

    share_service_models()
    return boto3.session.Session(region_name=region)


def botocore_config(retry_mode: str, max_attempts: int, connect_timeout: float, read_timeout: float):
    """botocore's client settings: ``retry_mode`` retries (``max_attempts`` in all, the first call included) and the
    connect/read timeouts in seconds."""
    from botocore.config import Config   # deferred with boto3

    return Config(retries={"mode": retry_mode, "total_max_attempts": int(max_attempts)},
                  connect_timeout=connect_timeout, read_timeout=read_timeout)


def make_client(session, service: str, config, default_endpoint_url: str | None = None, **kwargs):
    """``session.client(service)`` with ``config``; ``default_endpoint_url`` (moto, a private endpoint) unless the caller
    passes its own ``endpoint_url``."""
    if default_endpoint_url:
        kwargs.setdefault("endpoint_url", default_endpoint_url)
    return session.client(service, config=config, **kwargs)
