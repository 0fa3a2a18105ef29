"""What a node's kubelet is told by its userData: node labels, register-with-taints, max pods and the reserved /
eviction settings, read back from the text the launch template carries (the inverse of
``adapters/aws/userdata.render_user_data``, for the simulated kubelet).

* **AL2023**: the ``application/node.eks.aws`` parts of the MIME archive, merged in order as nodeadm does (a later
  NodeConfig wins per key): ``spec.kubelet.config`` (``maxPods``, ``podsPerCore``, ``registerWithTaints``,
  ``systemReserved``, ``kubeReserved``, ``evictionHard``) and the ``--node-labels`` flag of ``spec.kubelet.flags``;
* **AL2**: ``/etc/eks/bootstrap.sh ... --kubelet-extra-args '...'`` (``--node-labels``, ``--register-with-taints``,
  ``--max-pods``, ``--pods-per-core``, ``--system-reserved``, ``--kube-reserved``, ``--eviction-hard``);
* **Bottlerocket**: TOML ``settings.kubernetes`` (``node-labels``, ``node-taints``, ``max-pods``,
  ``system-reserved``, ``kube-reserved``, ``eviction-hard``).

Anything else (Windows, a Custom family's own script, no userData) gives an empty :class:`KubeletFlags`: the
kubelet registers with its defaults.  The reserved and eviction maps use the EC2NodeClass ``spec.kubelet`` key names
(``catalog.allocatable.NodeSettings`` reads them).
"""

from __future__ import annotations

import base64
import binascii
import shlex
import tomllib
from dataclasses import dataclass, field

import yaml

from ..adapters.aws.userdata import CT_NODECONFIG, UserDataError, is_mime, parse_mime_parts

__all__ = ["KubeletFlags", "read_user_data", "decode_user_data"]


@dataclass
class KubeletFlags:
    """The kubelet settings a node's userData gives (None / empty: not set, the kubelet's default)."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict] = field(default_factory=list)
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: dict[str, str] = field(default_factory=dict)
    kube_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    source: str = ""          # "AL2023" | "AL2" | "Bottlerocket" | "" (nothing read)

    def settings(self) -> dict:
        """``NodeSettings`` overrides for what was set (``NodeSettings.from_nodeclass(nodeclass, **flags.settings())``)."""
        out: dict = {}
        if self.max_pods is not None:
            out["max_pods"] = self.max_pods
        if self.pods_per_core is not None:
            out["pods_per_core"] = self.pods_per_core
        for key in ("system_reserved", "kube_reserved", "eviction_hard"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key))
        return out


def decode_user_data(value: str | None) -> str:
    """DescribeInstanceAttribute's base64 ``UserData.Value`` -> text ("" when absent or not text)."""
    if not value:
        return ""
    try:
        return base64.b64decode(value).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""


def read_user_data(text: str | None) -> KubeletFlags:
    """The kubelet flags in a node's userData (see the module doc); unreadable text gives no flags."""
    if not text or not text.strip():
        return KubeletFlags()
    try:
        if is_mime(text):
            parts = parse_mime_parts(text)
            configs = [body for ct, body in parts if ct.split(";")[0].strip() == CT_NODECONFIG]
            if configs:
                return _al2023(configs)
            for _ct, body in parts:
                if "/etc/eks/bootstrap.sh" in body:
                    return _al2(body)
            return KubeletFlags()
        if "/etc/eks/bootstrap.sh" in text:
            return _al2(text)
        doc = tomllib.loads(text)
        return _bottlerocket(doc)
    except (UserDataError, tomllib.TOMLDecodeError, yaml.YAMLError, ValueError):
        return KubeletFlags()


# -- AL2023 ------------------------------------------------------------------------------------------------------------
def _al2023(bodies: list[str]) -> KubeletFlags:
    config: dict = {}
    flags: list[str] = []
    for body in bodies:
        doc = yaml.safe_load(body) or {}
        kubelet = ((doc.get("spec") or {}).get("kubelet") or {}) if isinstance(doc, dict) else {}
        config.update(kubelet.get("config") or {})
        flags.extend(str(f) for f in kubelet.get("flags") or [])
    out = KubeletFlags(source="AL2023")
    out.max_pods = _int(config.get("maxPods"))
    out.pods_per_core = _int(config.get("podsPerCore"))
    out.taints = [dict(t) for t in config.get("registerWithTaints") or []]
    out.system_reserved = _strings(config.get("systemReserved"))
    out.kube_reserved = _strings(config.get("kubeReserved"))
    out.eviction_hard = _strings(config.get("evictionHard"))
    for flag in flags:
        name, _, value = flag.partition("=")
        if name == "--node-labels":
            out.labels.update(_pairs(value.strip().strip('"'), "="))
    return out


# -- AL2 ---------------------------------------------------------------------------------------------------------------
def _al2(script: str) -> KubeletFlags:
    words = shlex.split(script.replace("\\\n", " "), comments=False)
    out = KubeletFlags(source="AL2")
    extra = ""
    for i, w in enumerate(words):
        if w == "--kubelet-extra-args" and i + 1 < len(words):
            extra = words[i + 1]
    for arg in shlex.split(extra):
        name, _, value = arg.partition("=")
        if name == "--node-labels":
            out.labels.update(_pairs(value, "="))
        elif name == "--register-with-taints":
            out.taints = [_taint(t) for t in value.split(",") if t]
        elif name == "--max-pods":
            out.max_pods = _int(value)
        elif name == "--pods-per-core":
            out.pods_per_core = _int(value)
        elif name == "--system-reserved":
            out.system_reserved = _pairs(value, "=")
        elif name == "--kube-reserved":
            out.kube_reserved = _pairs(value, "=")
        elif name == "--eviction-hard":
            out.eviction_hard = _pairs(value, "<")
    return out


# -- Bottlerocket ------------------------------------------------------------------------------------------------------
def _bottlerocket(doc: dict) -> KubeletFlags:
    k8s = (doc.get("settings") or {}).get("kubernetes") or {}
    out = KubeletFlags(source="Bottlerocket" if k8s else "")
    out.labels = _strings(k8s.get("node-labels"))
    for key, values in (k8s.get("node-taints") or {}).items():
        for v in values if isinstance(values, list) else [values]:
            out.taints.append(_taint(f"{key}={v}"))
    out.max_pods = _int(k8s.get("max-pods"))
    out.system_reserved = _strings(k8s.get("system-reserved"))
    out.kube_reserved = _strings(k8s.get("kube-reserved"))
    out.eviction_hard = _strings(k8s.get("eviction-hard"))
    return out


# -- helpers -----------------------------------------------------------------------------------------------------------
def _int(v) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    return int(v)


def _strings(m) -> dict[str, str]:
    return {str(k): str(v) for k, v in (m or {}).items()} if isinstance(m, dict) else {}


def _pairs(text: str, sep: str) -> dict[str, str]:
    """``a=1,b=2`` (or ``memory.available<100Mi,...`` with ``sep="<"``) -> a map."""
    out = {}
    for item in text.split(","):
        k, found, v = item.partition(sep)
        if found and k:
            out[k.strip()] = v.strip()
    return out


def _taint(text: str) -> dict:
    """``key=value:Effect`` (value may be empty, ``key:Effect`` too) -> a taint."""
    kv, _, effect = text.rpartition(":")
    key, _, value = kv.partition("=")
    t = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    return t
