"""Moved to :mod:`karpenter_lambda.cloudprovider.launch`.  This name is that module itself (not a copy of its
names), so code that replaces ``ec2_launch.launch`` (bench/interruption.py times each launch) still reaches the
launches the cloud provider makes."""

import sys

from ..cloudprovider import launch as _launch

sys.modules[__name__] = _launch
