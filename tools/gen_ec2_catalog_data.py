"""Generate the packaged offline EC2 catalog (``karpenter_lambda/data/ec2-catalog.json.gz``) from moto's data.

``plan`` (catalog source ``moto-bundled``) reads moto's EC2 data files when moto is installed; a plain
``pip install .`` has no moto, so the same data ships in the package, read by
``karpenter_lambda.adapters.aws.ec2_catalog.bundled_ec2_data``.  Run after upgrading moto::

    .venv/bin/python tools/gen_ec2_catalog_data.py

The file holds, as gzip'd JSON: ``instanceTypes`` (moto's DescribeInstanceTypes entries, the same dicts
boto3 returns, in moto's order), ``offerings`` (region -> ``[[instanceType, zone], ...]``, availability-zone
offerings in moto's order) and ``zoneIds`` (region -> zone name -> zone id, as moto's
DescribeAvailabilityZones).  ``tests/catalog/test_packaged_catalog.py`` checks it matches moto.
"""

from __future__ import annotations

import gzip
import json
import sys
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "layers" / "core" / "python"))

from karpenter_lambda.adapters.aws import moto_catalog  # noqa: E402

OUT = REPO / "layers" / "core" / "python" / "karpenter_lambda" / "data" / "ec2-catalog.json.gz"


def build() -> dict:
    regions = sorted(moto_catalog.known_regions())
    offerings, zone_ids = {}, {}
    for region in regions:
        offs = moto_catalog.offerings(region)
        if offs:
            offerings[region] = [[o["InstanceType"], o["Location"]] for o in offs]
        zones = moto_catalog.zone_ids(region)
        if zones:
            zone_ids[region] = zones
    return {"generatedFrom": f"moto {version('moto')}", "instanceTypes": moto_catalog.instance_types(),
            "offerings": offerings, "zoneIds": zone_ids}


def main() -> int:
    data = json.dumps(build(), separators=(",", ":"), sort_keys=False).encode()
    OUT.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{OUT.relative_to(REPO)}: {len(data):,} bytes JSON, {OUT.stat().st_size:,} bytes gzip")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
