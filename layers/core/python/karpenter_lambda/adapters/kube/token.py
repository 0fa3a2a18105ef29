"""The standard EKS bearer token (what ``aws eks get-token`` prints).

``k8s-aws-v1.`` + base64url (no padding) of an STS ``GetCallerIdentity`` URL
presigned with SigV4, with the header ``x-k8s-aws-id: <cluster>`` signed in
and a 60 s expiry.  EKS accepts such a token for 15 minutes;
:class:`TokenProvider` re-signs after 10.
"""

from __future__ import annotations

import base64
import threading
import time
from typing import Callable

__all__ = ["TOKEN_PREFIX", "CLUSTER_ID_HEADER", "get_token", "TokenProvider"]

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRY_SECONDS = 60
REFRESH_AFTER_SECONDS = 10 * 60


def get_token(cluster_name: str, region: str | None = None, session=None) -> str:
    """A fresh EKS token for ``cluster_name`` signed with ``session``'s credentials (a boto3 Session)."""
    import boto3
    from botocore.signers import RequestSigner

    if not cluster_name:
        raise ValueError("cluster name is required for an EKS token")
    session = session or boto3.Session()
    region = region or session.region_name or "us-east-1"
    creds = session.get_credentials()
    if creds is None:
        raise RuntimeError("no AWS credentials found to sign the EKS token")
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", creds, session.events)
    params = {
        "method": "GET",
        "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {},
        "headers": {CLUSTER_ID_HEADER: cluster_name},
        "context": {},
    }
    url = signer.generate_presigned_url(params, region_name=region, expires_in=URL_EXPIRY_SECONDS, operation_name="")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")


class TokenProvider:
    """Caches a token and re-signs it ``refresh_after`` seconds (default 10 min) after issuing it."""

    def __init__(
        self,
        cluster_name: str,
        region: str | None = None,
        session=None,
        refresh_after: float = REFRESH_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        signer: Callable[[], str] | None = None,
    ):
        self.cluster_name = cluster_name
        self.region = region
        self.session = session
        self.refresh_after = refresh_after
        self._clock = clock
        self._signer = signer or (lambda: get_token(self.cluster_name, self.region, self.session))
        self._token: str | None = None
        self._issued = 0.0
        self._lock = threading.Lock()

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now - self._issued >= self.refresh_after:
                self._token = self._signer()
                self._issued = now
            return self._token
