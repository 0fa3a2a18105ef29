"""Moved to :mod:`karpenter_lambda.cloudprovider.catalog`.  This name is that module itself (not a copy of its
names), so tests that reset ``catalog_cache._catalog_cache`` still reset the cache the cloud provider reads."""

import sys

from ..cloudprovider import catalog as _catalog

sys.modules[__name__] = _catalog
