"""The instance catalog: instance types (labels, capacity, overhead, offerings) and prices. Pure.

Entry points::

    from karpenter_lambda.catalog import build_instance_types, PriceBook
    prices = PriceBook.from_bundled("us-east-1")           # .with_on_demand({...}) / .with_spot({(type, zone): p})
    types = build_instance_types(raw_types, offerings, prices, "us-east-1", nodeclass=None)
    it = types[0]; it.labels, it.capacity, it.overhead, it.allocatable, it.offerings
    types.held, types.skipped    # left out of the list: held for the NodeOverlays (catalog.overlay), and why

With AWS (or moto): ``karpenter_lambda.adapters.aws.ec2_catalog.load_catalog``.  See docs/catalog.md.
"""

from .allocatable import NodeSettings
from .instancetypes import build_instance_types, compute_labels
from .pricing import PriceBook
from .types import InstanceType, InstanceTypes, Offering

__all__ = ["InstanceType", "InstanceTypes", "Offering", "PriceBook", "NodeSettings", "build_instance_types", "compute_labels"]
