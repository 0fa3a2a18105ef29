"""pynamodb model of the state table, bound to a table/region/endpoint at run time.

pynamodb reads ``table_name``, ``region`` and ``host`` from a model's ``Meta``
class, which is fixed when the class is defined.  The table name and endpoint
here come from the environment (or the CLI) at run time, so
:func:`state_model` builds one ``Model`` subclass per ``(table, region, host)``
and caches it; every subclass shares the attribute layout below.

Layout (one item per object; see docs/state.md):

====================  ======  ==============================================
attribute             type    meaning
====================  ======  ==============================================
``pk`` (hash key)     S       ``<cluster>#<Kind>``, e.g. ``prod#NodePool``
``sk`` (range key)    S       object name
``cluster``           S       cluster name
``kind``              S       ``NodePool`` / ``EC2NodeClass`` / ``NodeClaim`` / ...
``apiVersion``        S       e.g. ``karpenter.sh/v1``
``metadata``          S       JSON of ``metadata`` (without ``resourceVersion``)
``spec``              S       JSON of ``spec``
``status``            S       JSON of ``status``
``version``           N       optimistic-locking counter (pynamodb ``VersionAttribute``)
``createdAt``         S       RFC 3339 UTC, set on create
``updatedAt``         S       RFC 3339 UTC, set on every write
====================  ======  ==============================================
"""

from __future__ import annotations

import functools
import ipaddress
import os
from urllib.parse import urlparse

from pynamodb.attributes import JSONAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.models import Model

from .tables import (  # noqa: F401  (re-exported)
    CACHE_TABLE_ENV,
    DEFAULT_CACHE_TABLE,
    DEFAULT_STATE_TABLE,
    STATE_TABLE_ENV,
    cache_table_name,
    state_table_name,
)

ENDPOINT_ENVS = ("KARPENTER_LAMBDA_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL")
DEFAULT_REGION = "us-east-1"


def resolve_region(region: str | None = None) -> str:
    return region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def resolve_endpoint(endpoint_url: str | None = None) -> str | None:
    """The explicit URL, else the first of KARPENTER_LAMBDA_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL; None = AWS."""
    if endpoint_url:
        return endpoint_url
    for var in ENDPOINT_ENVS:
        if os.environ.get(var):
            return os.environ[var]
    return None


def is_local_endpoint(endpoint_url: str | None) -> bool:
    """True for a loopback endpoint (moto_server, DynamoDB Local) where any credentials are accepted."""
    if not endpoint_url:
        return False
    host = urlparse(endpoint_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _local_credentials(endpoint_url: str | None) -> tuple[str | None, str | None]:
    """Dummy credentials for a loopback endpoint when the environment has none (moto_server accepts anything)."""
    if not is_local_endpoint(endpoint_url):
        return None, None
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE"):
        return None, None
    return "testing", "testing"


@functools.lru_cache(maxsize=64)
def state_model(table_name: str, region: str, host: str | None) -> type[Model]:
    """The state-table Model class bound to this table, region and endpoint (cached: one class each)."""
    key_id, secret = _local_credentials(host)

    class Meta:
        pass

    Meta.table_name = table_name
    Meta.region = region
    Meta.host = host
    Meta.billing_mode = "PAY_PER_REQUEST"
    Meta.aws_access_key_id = key_id
    Meta.aws_secret_access_key = secret
    # fail fast against a dead endpoint: pynamodb/botocore retry this many times with backoff
    Meta.max_retry_attempts = 2 if host else 3
    Meta.connect_timeout_seconds = 5 if host else 15

    namespace = {
        "__module__": __name__,
        "__qualname__": "StateItem",
        "Meta": Meta,
        "pk": UnicodeAttribute(hash_key=True),
        "sk": UnicodeAttribute(range_key=True),
        "cluster": UnicodeAttribute(),
        "kind": UnicodeAttribute(),
        "api_version": UnicodeAttribute(attr_name="apiVersion", null=True),
        "metadata": JSONAttribute(null=True),
        "spec": JSONAttribute(null=True),
        "status": JSONAttribute(null=True),
        "version": VersionAttribute(),
        "created_at": UnicodeAttribute(attr_name="createdAt", null=True),
        "updated_at": UnicodeAttribute(attr_name="updatedAt", null=True),
    }
    return type(Model)("StateItem", (Model,), namespace)
