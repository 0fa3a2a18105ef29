"""The SQS message bodies the watcher sends, their size limits, and the pieces they are built from.

The schemas are a contract, documented in ``docs/watcher.md``:
  - ``{"type": "pod", "cluster", "sentAt", ["resync": true,] "pod": <slim pod>[, "truncated": [...]]}``
    for a pending pod (:func:`pod_message`, :func:`pod_body`);
  - ``{"type": "pod-bound"|"pod-deleted", "cluster", "sentAt", "pod": <pod ref>}`` (:func:`pod_ref`);
  - ``{"type": "node", "event", "cluster", "sentAt", "node": <node summary>}`` (:func:`node_summary`).
Pure functions of their inputs (and of the clock, for ``sentAt``); standard library only.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

MAX_MESSAGE_BYTES = 256 * 1024  # SQS limit per message and per SendMessageBatch request
MAX_BATCH_ENTRIES = 10
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def iso_time(epoch: float | None = None, millis: bool = True) -> str:
    """UTC time ``2026-01-02T03:04:05.678Z`` (milliseconds truncated; ``millis=False``: ``...:05Z``) of
    ``epoch`` seconds, now when None.  The one time format of the watcher: ``sentAt`` and the log lines."""
    if epoch is None:
        epoch = time.time()
    whole = math.floor(epoch)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    if not millis:
        return text + "Z"
    return f"{text}.{min(999, int((epoch - whole) * 1000)):03d}Z"


def pod_key(pod: dict) -> str:
    """``namespace/name`` of a pod, the namespace defaulting to "default".  The same rule as the project's
    ``karpenter_lambda.api.kube.pod_key`` (the watcher image cannot import that package; a test keeps them equal)."""
    m = pod.get("metadata") or {}
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


def pod_key_in(body: str) -> str:
    """:func:`pod_key` of the pod in a message body (for the drop log), or "" when it names no pod."""
    try:
        pod = json.loads(body).get("pod") or {}
        name = (pod.get("metadata") or {}).get("name")
    except (ValueError, AttributeError):
        return ""
    return pod_key(pod) if name else ""


def dumps(obj: Any) -> str:
    """Compact JSON, keys in insertion order (the message bodies)."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)


# ----------------------------------------------------------------------------- pending pods


def _pick(src: dict, keys) -> dict:
    return {k: src[k] for k in keys if src.get(k) is not None}


def slim_pod(pod: dict, drop_annotations: bool = False) -> dict:
    """The part of a pod the provisioner needs (see docs/watcher.md for the field list)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    m = _pick(meta, ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences", "creationTimestamp"))
    if not drop_annotations and meta.get("annotations"):
        ann = {k: v for k, v in meta["annotations"].items() if k not in _DROP_ANNOTATIONS}
        if ann:
            m["annotations"] = ann
    s = _pick(
        spec,
        (
            "overhead",
            "nodeSelector",
            "affinity",
            "tolerations",
            "topologySpreadConstraints",
            "priority",
            "priorityClassName",
            "schedulerName",
            "hostNetwork",
            "preemptionPolicy",
            "runtimeClassName",
        ),
    )
    s["containers"] = [
        _pick(c, ("name", "resources", "ports")) for c in spec.get("containers") or [] if isinstance(c, dict)
    ]
    if spec.get("initContainers"):
        s["initContainers"] = [
            _pick(c, ("name", "resources", "ports", "restartPolicy")) for c in spec["initContainers"] if isinstance(c, dict)
        ]
    vols = []
    for v in spec.get("volumes") or []:
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict):
            vols.append({"name": v.get("name"), "persistentVolumeClaim": {"claimName": v["persistentVolumeClaim"].get("claimName")}})
        elif isinstance(v, dict) and v.get("ephemeral") is not None:
            vols.append({"name": v.get("name"), "ephemeral": {}})
    if vols:
        s["volumes"] = vols
    return {"metadata": m, "spec": s}


def slim_json(pod: dict, cluster: str) -> tuple[str, bool] | None:
    """The slim pod as compact JSON, and whether its annotations were dropped to fit one SQS
    message; None if it cannot fit even then.  Room is kept for the largest envelope (with the
    ``resync`` and ``truncated`` keys), so a later re-send of the same JSON always fits too."""
    envelope = len(pod_body("", True, cluster, resync=True).encode())
    pj = dumps(slim_pod(pod))
    if envelope + len(pj.encode()) <= MAX_MESSAGE_BYTES:
        return pj, False
    pj = dumps(slim_pod(pod, drop_annotations=True))
    if envelope + len(pj.encode()) <= MAX_MESSAGE_BYTES:
        return pj, True
    return None


def pod_body(pod_json: str, truncated: bool, cluster: str, resync: bool = False) -> str:
    """The ``"type": "pod"`` message around an already serialized slim pod."""
    parts = ['{"type":"pod","cluster":', json.dumps(cluster), ',"sentAt":"', iso_time(), '"']
    if resync:
        parts.append(',"resync":true')
    parts += [',"pod":', pod_json]
    if truncated:
        parts.append(',"truncated":["metadata.annotations"]')
    parts.append("}")
    return "".join(parts)


def pod_message(pod: dict, cluster: str, resync: bool = False) -> str | None:
    """The JSON body for a pending pod, shrunk if needed to fit one SQS message; None if it cannot fit.
    ``resync=True`` marks a re-send of an unchanged pod (``"resync": true``)."""
    slim = slim_json(pod, cluster)
    if slim is None:
        return None
    body = pod_body(slim[0], slim[1], cluster, resync)
    return body if len(body.encode()) <= MAX_MESSAGE_BYTES else None


# ----------------------------------------------------------------------------- pod and node events


def pod_ref(pod: dict) -> dict:
    """The pod of a ``pod-bound`` / ``pod-deleted`` event."""
    meta = pod.get("metadata") or {}
    kinds = [o.get("kind") for o in meta.get("ownerReferences") or [] if isinstance(o, dict) and o.get("controller")]
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
        "nodeName": (pod.get("spec") or {}).get("nodeName") or None,
        "ownerKind": kinds[0] if kinds else None,
    }


def pod_event(etype: str, cluster: str, pod: dict) -> str:
    """A ``pod-bound`` / ``pod-deleted`` message body."""
    return dumps({"type": etype, "cluster": cluster, "sentAt": iso_time(), "pod": pod_ref(pod)})


def node_summary(node: dict) -> dict:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    ready = "Unknown"
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = c.get("status") or "Unknown"
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "providerID": spec.get("providerID"),
        "labels": meta.get("labels") or {},
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
        "ready": ready,
        "allocatable": status.get("allocatable") or {},
    }


def node_digest(summary: dict) -> str:
    """The summary without its resourceVersion, as JSON: equal digests mean nothing worth sending changed."""
    d = {k: v for k, v in summary.items() if k not in ("resourceVersion",)}
    return dumps(d)


def node_event(event: str, cluster: str, summary: dict) -> str:
    """A ``"type": "node"`` message body (``event``: ADDED, MODIFIED or DELETED)."""
    return dumps({"type": "node", "event": event, "cluster": cluster, "sentAt": iso_time(), "node": summary})
