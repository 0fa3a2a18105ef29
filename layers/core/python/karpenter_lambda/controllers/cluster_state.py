"""Kubernetes objects as plain camelCase dicts: :func:`as_dict` (the official client's models or dicts).

The pure pod/node helpers live in :mod:`karpenter_lambda.api.kube` (re-exported here for callers of the
controllers); the cluster snapshot every decision reads is :mod:`.snapshot`.
"""

from __future__ import annotations

from ..api.kube import (  # noqa: F401  (re-exports)
    PROVIDER_PREFIX,
    instance_id_of,
    is_daemon_pod,
    is_terminal,
    node_allocatable,
    node_ready,
    pod_key,
    pod_uid,
    provider_id,
)


def as_dict(obj) -> dict:
    if obj is None or isinstance(obj, dict):
        return obj
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(obj)
