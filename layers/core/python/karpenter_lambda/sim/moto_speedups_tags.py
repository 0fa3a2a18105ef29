"""A faster moto for the embedded environment: an EC2 resource's own tags read from its entry, not by a scan.

moto 5.2 answers every EC2 resource's ``get_tags`` (each instance, volume, launch template, subnet, ... of every
Describe response, and every ``tag:`` filter) with ``describe_tags(filters={"resource-id": [its id]})``, which turns the
id into a glob pattern and matches it against every tag of every resource in the account: DescribeInstances cost grew
with the whole account's tags. A glob without ``*``, ``?``, ``[`` or a backslash matches only the string itself (the
pattern ends in ``\\Z``), so for such an id the answer is exactly that resource's entry: its tags in their order, with
the same four fields. Any other filter, or an id with a glob character, is moto's own scan.
``tests/sim/test_speed_tags.py`` holds the two equal.
"""

from __future__ import annotations

from typing import Any

from karpenter_lambda.sim import moto_patch

_GLOB = frozenset("*?[]\\")


def install() -> bool:
    """Patch ``TagBackend.describe_tags`` (once)."""
    from moto.ec2.models.tags import TagBackend
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    def make(original: Any) -> Any:
        def describe_tags(self: Any, filters: dict[str, list[str]] | None = None) -> list[dict[str, str]]:
            ids = filters.get("resource-id") if isinstance(filters, dict) and len(filters) == 1 else None
            if not (isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str) and ids[0]
                    and not _GLOB.intersection(ids[0])):
                return original(self, filters)
            resource_id = ids[0]
            tags = self.tags.get(resource_id)      # .get: no entry added to moto's defaultdict
            if not tags:
                return []
            resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
            return [{"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
                    for key, value in tags.items()]
        return describe_tags

    return moto_patch.replace(TagBackend, "describe_tags", make)


def uninstall() -> None:
    from moto.ec2.models.tags import TagBackend

    moto_patch.restore(TagBackend, "describe_tags")
