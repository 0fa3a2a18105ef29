"""Moved to the :mod:`karpenter_lambda.cloudprovider` package; this module stays for the modules that still import
the cloud provider from here (names only, no code)."""

from ..api.labels import NODECLAIM_TAG  # noqa: F401  (re-exported)
from ..cloudprovider import (  # noqa: F401  (re-exported)
    GONE_STATES,
    AWSCloudProvider,
    CloudProvider,
    CreateRequest,
    Instance,
    LaunchFailed,
    NoCapacity,
    NotOwned,
    instance_state,
    instance_tags,
    not_ready_reason,
)
