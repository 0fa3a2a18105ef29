"""NodeClaim templates kept across solves (issue 32).

Building a :class:`~.nodeclaim.NodeClaimTemplate` walks the whole catalog (1,300+ instance types: allocatable minus
the DaemonSet overhead, the requirements each type offers, compatibility with the NodePool), and a consolidation
sweep solves hundreds of times (two solves per ``simulate_removal``) on the same NodePools and catalog.  A template
depends only on its NodePool (name and spec), the resource vector layout (``rindex``), the DaemonSets' pod
templates and the instance-type objects; the one part that changes from solve to solve is ``remaining`` (the
NodePool limits minus its usage), the only state a solve mutates.  So the templates are kept here, keyed by those
contents (:meth:`~.nodeclaim.NodeClaimTemplate.shared` looks them up), and each solve gets
:meth:`~.nodeclaim.NodeClaimTemplate.with_usage`: a shallow copy with its own
``remaining``; the per-signature caches (compatible types, prices, fitting types) are shared, being functions of
the template alone.

The instance types are keyed by identity (the catalog hands out the same objects while it is warm, and nothing
mutates them); each entry keeps a tuple of those objects alive, so an id in a key is never reused by another
object while the entry exists.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .model import NodePoolInput

if TYPE_CHECKING:   # nodeclaim imports this module
    from .nodeclaim import NodeClaimTemplate

__all__ = ["key_for", "get", "put", "clear"]

MAX_ENTRIES = 32
#: a template whose shared per-signature caches grew past this many entries is rebuilt (bounded memory)
MAX_SIGNATURES = 4096

_TEMPLATES: dict[tuple, tuple[tuple, "NodeClaimTemplate"]] = {}


def _daemonsets_fingerprint(daemonsets: list) -> str:
    """What of the DaemonSets a template reads: their pod templates."""
    if not daemonsets:
        return ""
    return json.dumps([((ds.get("spec") or {}).get("template") or {}) for ds in daemonsets], sort_keys=True,
                      default=str)


def key_for(npi: NodePoolInput, rindex: list, daemonsets: list) -> tuple:
    """What a template is a function of: NodePool name and spec, ``rindex``, DaemonSet pod templates, instance
    types and the catalog's held ones (by identity)."""
    np_ = npi.nodepool
    return (np_.name, json.dumps(np_.spec, sort_keys=True, default=str), tuple(rindex),
            _daemonsets_fingerprint(daemonsets), tuple(map(id, npi.instance_types or ())),
            tuple(map(id, getattr(npi.instance_types, "held", ()))))


def get(key: tuple) -> "NodeClaimTemplate | None":
    """The template kept under ``key`` (None when absent or when its caches grew past ``MAX_SIGNATURES``)."""
    hit = _TEMPLATES.get(key)
    if hit is None or hit[1].cache_size() > MAX_SIGNATURES:
        return None
    return hit[1]


def put(key: tuple, npi: NodePoolInput, template: "NodeClaimTemplate") -> None:
    if len(_TEMPLATES) >= MAX_ENTRIES:
        _TEMPLATES.clear()
    # the tuple keeps the instance types alive: the ids in ``key`` stay theirs while the entry exists
    _TEMPLATES[key] = (tuple(npi.instance_types or ()) + tuple(getattr(npi.instance_types, "held", ())), template)


def clear() -> None:
    _TEMPLATES.clear()
