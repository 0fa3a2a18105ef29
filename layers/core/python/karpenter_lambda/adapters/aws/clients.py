"""boto3 sessions and clients for the functions: one session per process, every client with the same botocore
settings (standard or adaptive retries, connect/read timeouts below the functions' timeouts).

boto3 is imported here, not by the controllers (``import boto3`` costs ~0.45 s: only when a client is first made).
"""

from __future__ import annotations


def make_session(region: str):
    import boto3   # deferred: the cold-start cost is paid only by a function that makes a client

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
