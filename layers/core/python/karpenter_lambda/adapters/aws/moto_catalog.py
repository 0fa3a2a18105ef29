"""moto's bundled EC2 data, read straight from its package files (the fast offline catalog source).

moto answers ``DescribeInstanceTypes`` from a JSON file it ships; going through ``mock_aws``, its XML
serializer and botocore's parser takes 6-9 s for the 1,395 types.  The same file read directly takes
~0.07 s and gives the very dicts boto3 returns (same keys, ints, floats, bools, lists, same order;
``tests/catalog/test_offline_catalog.py`` compares both paths).  Nothing here imports moto or boto3.

* ``instance_types()``: the ``DescribeInstanceTypes`` entries (``ec2/resources/instance_types.json[.gz]``).
* ``offerings(region, location_type)``: ``DescribeInstanceTypeOfferings`` entries
  (``ec2/resources/instance_type_offerings/<location-type>/<region>.json[.gz]``, plus ``LocationType``
  as moto adds it); ``[]`` for a region moto knows but has no data for.
* ``zone_ids(region)``: zone name -> zone id as moto's ``DescribeAvailabilityZones`` answers: the
  irregular regions listed in ``moto/ec2/models/availability_zones_and_regions.py`` (read with ``ast``,
  not imported: importing moto.ec2 costs ~2 s), the others ``<region>a/b/c`` -> ``<short>-az1/2/3``.
* ``known_regions()``: EC2 regions of every partition in botocore's ``endpoints.json``: the regions
  moto serves; any other region raises ``KeyError(region)``, as moto's backend lookup does.

Everything is cached per process (``clear()`` forgets it).  Callers get new lists/dicts whose
entries are shared: do not mutate them.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import os
import threading
from typing import Any

__all__ = ["SOURCE", "instance_types", "offerings", "zone_ids", "known_regions", "check_region", "clear"]

#: The value of ``KARPENTER_LAMBDA_CATALOG_SOURCE`` / ``load_catalog(source=...)`` selecting this module.
SOURCE = "moto-bundled"

#: The partitions whose regions moto gives zones (``RegionsAndZonesBackend.regions``).
_ZONED_PARTITIONS = ("aws", "aws-us-gov", "aws-cn")

_lock = threading.Lock()
_cache: dict[tuple, Any] = {}


def clear() -> None:
    with _lock:
        _cache.clear()


def _memo(key: tuple, load):
    with _lock:
        if key in _cache:
            return _cache[key]
    value = load()
    with _lock:
        _cache[key] = value
    return value


def _package_dir(name: str) -> str:
    """The installed package's directory, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"catalog source {SOURCE!r} needs the {name!r} package installed (pip install moto)")
    return list(spec.submodule_search_locations)[0]


def _load_json(path: str) -> Any:
    """``path`` (.json) or its ``.gz`` twin, as moto's own ``load_resource`` (gzip first)."""
    if os.path.exists(path + ".gz"):
        with open(path + ".gz", "rb") as f:
            return json.loads(gzip.decompress(f.read()))
    with open(path, encoding="utf-8") as f:
        return json.loads(f.read())


def _moto_path(*parts: str) -> str:
    return os.path.join(_package_dir("moto"), *parts)


def _regions_by_partition() -> dict[str, frozenset[str]]:
    """partition -> its EC2 regions, from botocore's ``endpoints.json`` (read as data, botocore not imported)."""

    def load() -> dict[str, frozenset[str]]:
        data = _load_json(os.path.join(_package_dir("botocore"), "data", "endpoints.json"))
        out: dict[str, frozenset[str]] = {}
        for part in data.get("partitions") or []:
            endpoints = ((part.get("services") or {}).get("ec2") or {}).get("endpoints") or {}
            regions = part.get("regions") or {}
            out[part.get("partition", "")] = frozenset(name for name in endpoints if name in regions)
        return out

    return _memo(("regions",), load)


def known_regions() -> frozenset[str]:
    """EC2 regions of every botocore partition (``Session().get_available_regions("ec2", p)`` for each p)."""
    return frozenset().union(*_regions_by_partition().values())


def check_region(region: str) -> None:
    """Raise ``KeyError(region)`` when moto would not serve EC2 in ``region``."""
    if region not in known_regions():
        raise KeyError(region)


def instance_types() -> list[dict]:
    """Every ``DescribeInstanceTypes`` entry, in moto's order (the same in every region)."""

    def load() -> list[dict]:
        return list(_load_json(_moto_path("ec2", "resources", "instance_types.json")).values())

    return list(_memo(("types",), load))


def offerings(region: str, location_type: str = "availability-zone") -> list[dict]:
    """``DescribeInstanceTypeOfferings(LocationType=location_type)`` entries for ``region``."""
    check_region(region)

    def load() -> list[dict]:
        path = _moto_path("ec2", "resources", "instance_type_offerings", location_type, f"{region}.json")
        if not os.path.exists(path) and not os.path.exists(path + ".gz"):
            return []
        return [dict(o, LocationType=location_type) for o in _load_json(path)]

    return list(_memo(("offerings", region, location_type), load))


def _listed_zones() -> dict[str, dict[str, str]]:
    """The irregular regions' zones from moto's ``RegionsAndZonesBackend.zones = {...}`` literal."""
    path = _moto_path("ec2", "models", "availability_zones_and_regions.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "RegionsAndZonesBackend"):
            continue
        for stmt in cls.body:
            if (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict)
                    and any(isinstance(t, ast.Name) and t.id == "zones" for t in stmt.targets)):
                out: dict[str, dict[str, str]] = {}
                for key, value in zip(stmt.value.keys, stmt.value.values):
                    zones = out.setdefault(ast.literal_eval(key), {})
                    for call in value.elts:
                        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                        zones[kw["name"]] = kw["zone_id"]
                return out
    raise RuntimeError(f"{path}: no RegionsAndZonesBackend.zones literal (moto changed); cannot map zone ids")


def _regular_zone_ids(region: str) -> dict[str, str]:
    """moto's rule for the other regions: eu-central-1 -> euc1-az1..3, us-gov-west-1 -> usgw1-az1..3."""
    parts = region.split("-")
    short = "usg" if region.startswith("us-gov") else parts[0]
    for cardinal in ("north", "south", "central", "east", "west"):
        if cardinal in region:
            short += cardinal[0]
    short += parts[-1]
    return {f"{region}{letter}": f"{short}-az{i}" for i, letter in enumerate("abc", start=1)}


def zone_ids(region: str) -> dict[str, str]:
    """Zone name -> zone id, as moto's ``DescribeAvailabilityZones`` in ``region``."""
    check_region(region)

    def load() -> dict[str, str]:
        listed = _memo(("listed-zones",), _listed_zones)
        if region in listed:
            return dict(listed[region])
        by_partition = _regions_by_partition()
        if any(region in by_partition.get(p, ()) for p in _ZONED_PARTITIONS):
            return _regular_zone_ids(region)
        return {}  # e.g. the ISO partitions: moto lists no zones there

    return dict(_memo(("zone-ids", region), load))
