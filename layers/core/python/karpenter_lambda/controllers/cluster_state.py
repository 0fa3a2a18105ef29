"""Kubernetes objects as plain camelCase dicts: :func:`as_dict` (the official client's models or dicts; defined in
:mod:`karpenter_lambda.adapters.kube.client`, where the kubernetes client is used).

The pure pod/node helpers live in :mod:`karpenter_lambda.api.kube` (re-exported here for callers of the
controllers); the cluster snapshot every decision reads is :mod:`.snapshot`.
"""

from __future__ import annotations

from ..adapters.kube.client import as_dict  # noqa: F401  (re-exported)
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
