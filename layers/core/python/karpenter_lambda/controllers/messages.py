"""Parse and validate the watcher's SQS messages (schema: docs/watcher.md).

A pod message body is ``{"type": "pod", "pod": {...}, "cluster": "<name>", "sentAt": "..."}``.
Other message types (``node``, ``pod-bound``, ``pod-deleted``) are valid but carry nothing the
provisioner acts on.  Anything else raises :class:`MalformedMessage` naming the problem, so the
handler fails that record only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..api.quantity import QuantityError, parse_quantity

KNOWN_TYPES = {"pod", "node", "pod-bound", "pod-deleted"}


class MalformedMessage(ValueError):
    """The body of one SQS record is not a valid watcher message."""


@dataclass
class PodMessage:
    pod: dict
    cluster: str | None
    sent_at: str | None

    @property
    def key(self) -> str:
        m = self.pod["metadata"]
        return f"{m['namespace']}/{m['name']}"

    @property
    def uid(self) -> str:
        return self.pod["metadata"]["uid"]


def parse_body(body: str | None, cluster: str | None = None) -> PodMessage | None:
    """A :class:`PodMessage`, or None for a well-formed message of another type."""
    if body is None or body == "":
        raise MalformedMessage("empty message body")
    try:
        doc = json.loads(body)
    except (TypeError, ValueError) as e:
        raise MalformedMessage(f"body is not JSON: {e}") from None
    except RecursionError as e:   # e.g. 100,000 nested '[': the body can never be decoded
        raise MalformedMessage(f"body is not decodable JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MalformedMessage(f"body must be a JSON object, got {type(doc).__name__}")
    mtype = doc.get("type")
    if not isinstance(mtype, str) or mtype not in KNOWN_TYPES:
        raise MalformedMessage(f"type: unsupported message type {mtype!r} (expected one of {sorted(KNOWN_TYPES)})")
    msg_cluster = doc.get("cluster")
    if cluster and msg_cluster and msg_cluster != cluster:
        raise MalformedMessage(f"cluster: message is for cluster {msg_cluster!r}, this function serves {cluster!r}")
    if mtype != "pod":
        return None
    pod = doc.get("pod")
    if not isinstance(pod, dict):
        raise MalformedMessage("pod: required object missing")
    meta = pod.get("metadata")
    if not isinstance(meta, dict):
        raise MalformedMessage("pod.metadata: required object missing")
    for f in ("name", "uid"):
        if not isinstance(meta.get(f), str) or not meta.get(f):
            raise MalformedMessage(f"pod.metadata.{f}: required string missing")
    if meta.get("namespace") is None:
        meta["namespace"] = "default"
    elif not isinstance(meta["namespace"], str) or not meta["namespace"]:
        raise MalformedMessage(f"pod.metadata.namespace: must be a non-empty string, got {meta['namespace']!r}")
    spec = pod.get("spec")
    if spec is None:
        pod["spec"] = spec = {}
    if not isinstance(spec, dict):
        raise MalformedMessage("pod.spec: must be an object")
    containers = spec.get("containers", [])
    if not isinstance(containers, list):
        raise MalformedMessage("pod.spec.containers: must be a list")
    # quantities must parse (and not be negative), or the scheduler would fail the whole batch later
    for field_name in ("containers", "initContainers"):
        items = spec.get(field_name) or []
        if not isinstance(items, list):
            raise MalformedMessage(f"pod.spec.{field_name}: must be a list, got {type(items).__name__}")
        for i, c in enumerate(items):
            if not isinstance(c, dict):
                raise MalformedMessage(f"pod.spec.{field_name}[{i}]: must be an object")
            resources = c.get("resources") or {}
            if not isinstance(resources, dict):
                raise MalformedMessage(f"pod.spec.{field_name}[{i}].resources: must be an object, "
                                       f"got {type(resources).__name__}")
            for kind in ("requests", "limits"):
                values = resources.get(kind) or {}
                if not isinstance(values, dict):
                    raise MalformedMessage(f"pod.spec.{field_name}[{i}].resources.{kind}: must be an object, "
                                           f"got {type(values).__name__}")
                for res, q in values.items():
                    where = f"pod.spec.{field_name}[{i}].resources.{kind}.{res}"
                    try:
                        v = parse_quantity(q)
                    except QuantityError as e:
                        raise MalformedMessage(f"{where}: {e}") from None
                    if v < 0:
                        raise MalformedMessage(f"{where}: must be greater than or equal to 0, got {q!r}")
    return PodMessage(pod=pod, cluster=msg_cluster, sent_at=doc.get("sentAt"))
