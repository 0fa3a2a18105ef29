"""Node userData per AMI family (pure rendering, no I/O).

``render_user_data(family, cluster, nodeclass, labels, taints, startup_taints, kubelet,
max_pods, user_data)`` returns the plain-text userData (the launch template base64-encodes it):

* **AL2023**: MIME multipart; the user's parts first (a MIME archive is split into its parts,
  a YAML document becomes an ``application/node.eks.aws`` part, anything else a shell script),
  then Karpenter's ``NodeConfig`` (cluster name/endpoint/CA/CIDR, kubelet config with
  ``clusterDNS``, ``maxPods``, ``registerWithTaints`` and the EC2NodeClass kubelet settings, every
  other KubeletConfiguration field of ``spec.kubelet`` as given, ``--node-labels`` flag).  nodeadm
  merges the NodeConfigs in order, so ours wins.
* **AL2**: MIME multipart; the user's parts first (each with its whole MIME header, e.g.
  ``Content-Transfer-Encoding: base64``, as upstream's ``copyCustomUserDataParts``), then ``/etc/eks/bootstrap.sh`` with
  ``--apiserver-endpoint``, ``--b64-cluster-ca``, ``--dns-cluster-ip``, ``--use-max-pods false``
  and ``--kubelet-extra-args '--node-labels=... --register-with-taints=... --max-pods=N ...'``.
* **Bottlerocket**: the user's TOML merged with ours; ``settings.kubernetes`` keys Karpenter
  manages win, node labels are merged (ours win), node taints are Karpenter's; ``instanceStorePolicy: RAID0``
  adds the ``apiclient ephemeral-storage`` bootstrap command for the Bottlerocket version.
* **Windows2019/2022/2025**: ``<powershell>`` with the user's script first, then
  ``Start-EKSBootstrap.ps1``.
* **Custom**: the user's userData unchanged.

Every node registers with the ``karpenter.sh/unregistered:NoExecute`` taint (Karpenter v1) plus
the NodePool's taints and startup taints.
"""

from __future__ import annotations

import email
import ipaddress
import re
import tomllib
from dataclasses import dataclass
from typing import Any, Iterable

import yaml

from ...api import labels as wk
from ...api.kubelet_config import passthrough_fields
from .toml_writer import dump_toml

UNREGISTERED_TAINT = {"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}
MIME_BOUNDARY = "//"
CT_NODECONFIG = "application/node.eks.aws"
CT_SHELL = 'text/x-shellscript; charset="us-ascii"'

RAID0 = "RAID0"  # the one instanceStorePolicy
FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025", "Custom")


class UserDataError(ValueError):
    """The EC2NodeClass's userData cannot be merged (e.g. bad TOML for Bottlerocket)."""


@dataclass(frozen=True)
class ClusterInfo:
    """What a node needs to join: EKS cluster name, API endpoint, base64 CA bundle, service CIDR."""

    name: str
    endpoint: str
    ca_b64: str | None = None
    cidr: str | None = None
    ip_family: str | None = None  # "ipv4" | "ipv6"; derived from cidr when None
    dns_ip: str | None = None  # kube-dns service IP; derived from cidr (.10 / ::a) when None

    @property
    def family(self) -> str:
        if self.ip_family:
            return self.ip_family.lower()
        if self.cidr:
            try:
                return "ipv6" if ipaddress.ip_network(self.cidr, strict=False).version == 6 else "ipv4"
            except ValueError:
                pass
        return "ipv4"

    @property
    def cluster_dns(self) -> str | None:
        if self.dns_ip:
            return self.dns_ip
        if not self.cidr:
            return None
        try:
            net = ipaddress.ip_network(self.cidr, strict=False)
        except ValueError:
            return None
        return str(net.network_address + 10)


# ---------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------
_KUBELET_ALLOWED_K8S_LABELS = {
    wk.ARCH,
    wk.OS,
    wk.INSTANCE_TYPE,
    wk.ZONE,
    wk.REGION,
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
}


def kubelet_labels(labels: dict[str, str] | None) -> dict[str, str]:
    """Labels the kubelet may set on itself (NodeRestriction): drop other kubernetes.io / k8s.io keys.

    Karpenter sets the full label set on the Node at registration anyway.
    """
    out = {}
    for k, v in sorted((labels or {}).items()):
        domain = k.split("/", 1)[0] if "/" in k else ""
        restricted = domain == "kubernetes.io" or domain.endswith(".kubernetes.io") or domain == "k8s.io" or domain.endswith(".k8s.io")
        if restricted and k not in _KUBELET_ALLOWED_K8S_LABELS and not (
            domain.endswith("node.kubernetes.io") or domain.endswith("kubelet.kubernetes.io")
        ):
            continue
        if k == wk.HOSTNAME:
            continue
        out[k] = str(v)
    return out


def all_taints(taints: Iterable[dict] | None, startup_taints: Iterable[dict] | None) -> list[dict]:
    """NodePool taints + startup taints + the unregistered taint, de-duplicated on key+effect, sorted."""
    seen = {}
    for t in list(taints or []) + list(startup_taints or []) + [UNREGISTERED_TAINT]:
        if not t.get("key") or not t.get("effect"):
            raise UserDataError(f"taint {t!r} needs key and effect")
        seen.setdefault((t["key"], t["effect"]), {k: t[k] for k in ("key", "value", "effect") if t.get(k) not in (None, "")})
    return sorted(seen.values(), key=lambda t: (t["key"], t["effect"], t.get("value", "")))


def _taint_str(t: dict) -> str:
    return f"{t['key']}={t.get('value', '')}:{t['effect']}"


def _join_map(m: dict, sep: str) -> str:
    return ",".join(f"{k}{sep}{m[k]}" for k in sorted(m))


def _kubelet_extra_args(labels: dict, taints: list[dict], kubelet: dict, max_pods: int | None) -> list[str]:
    args = []
    lbl = kubelet_labels(labels)
    if lbl:
        args.append(f"--node-labels={_join_map(lbl, '=')}")
    if taints:
        args.append("--register-with-taints=" + ",".join(_taint_str(t) for t in taints))
    mp = max_pods if max_pods is not None else kubelet.get("maxPods")
    if mp is not None:
        args.append(f"--max-pods={int(mp)}")
    if kubelet.get("podsPerCore") is not None:
        args.append(f"--pods-per-core={int(kubelet['podsPerCore'])}")
    for flag, key, sep in (
        ("--system-reserved", "systemReserved", "="),
        ("--kube-reserved", "kubeReserved", "="),
        ("--eviction-hard", "evictionHard", "<"),
        ("--eviction-soft", "evictionSoft", "<"),
        ("--eviction-soft-grace-period", "evictionSoftGracePeriod", "="),
    ):
        if kubelet.get(key):
            args.append(f"{flag}={_join_map(kubelet[key], sep)}")
    for flag, key in (
        ("--eviction-max-pod-grace-period", "evictionMaxPodGracePeriod"),
        ("--image-gc-high-threshold", "imageGCHighThresholdPercent"),
        ("--image-gc-low-threshold", "imageGCLowThresholdPercent"),
    ):
        if kubelet.get(key) is not None:
            args.append(f"{flag}={int(kubelet[key])}")
    if kubelet.get("cpuCFSQuota") is not None:
        args.append(f"--cpu-cfs-quota={'true' if kubelet['cpuCFSQuota'] else 'false'}")
    return args


def _dns_ip(cluster: ClusterInfo, kubelet: dict) -> str | None:
    dns = kubelet.get("clusterDNS") or []
    return dns[0] if dns else cluster.cluster_dns


# ---------------------------------------------------------------------------------------
# MIME
# ---------------------------------------------------------------------------------------
def is_mime(text: str) -> bool:
    s = text.lstrip()
    return s.startswith("MIME-Version:") or s.startswith("Content-Type:")


def parse_mime_parts(text: str) -> list[tuple[str, str]]:
    """``[(content type, body)]`` of a multipart MIME archive; raises :class:`UserDataError` when it is not one."""
    msg = email.message_from_string(text.lstrip())
    if not msg.is_multipart():
        raise UserDataError("userData starts with a MIME header but is not a multipart MIME archive")
    parts = []
    for part in msg.get_payload():
        ct = part.get("Content-Type") or "text/plain"
        body = part.get_payload(decode=False)
        if isinstance(body, list):
            raise UserDataError("nested multipart userData is not supported")
        parts.append((ct, body))
    return parts


def _canonical_header_key(key: str) -> str:
    """A MIME header name as Go's ``textproto.CanonicalMIMEHeaderKey`` writes it (``content-transfer-encoding`` ->
    ``Content-Transfer-Encoding``, ``MIME-Version`` -> ``Mime-Version``); a name with a space is left as it is."""
    if not key or any(c in key for c in " \t"):
        return key
    return "-".join(w[:1].upper() + w[1:].lower() for w in key.split("-"))


def parse_mime_part_headers(text: str) -> list[tuple[list[tuple[str, str]], str]]:
    """``[(headers, body)]`` of a multipart MIME archive, each part with its whole header as upstream's AL2
    ``copyCustomUserDataParts`` (``bootstrap/eksbootstrap.go``) copies it: Go's ``multipart.Reader`` gives the header
    with canonical names (folded values joined) and ``multipart.Writer.CreatePart`` writes them sorted by name, each
    name's values in order.  A ``quoted-printable`` part comes out decoded and without that header (Go's reader
    decodes it transparently); any other encoding (``base64``) is kept with its body as it is."""
    msg = email.message_from_string(text.lstrip())
    if not msg.is_multipart():
        raise UserDataError("userData starts with a MIME header but is not a multipart MIME archive")
    parts = []
    for part in msg.get_payload():
        body = part.get_payload(decode=False)
        if isinstance(body, list):
            raise UserDataError("nested multipart userData is not supported")
        headers: dict[str, list[str]] = {}
        for key, value in part.items():
            headers.setdefault(_canonical_header_key(key), []).append(re.sub(r"\r?\n[ \t]+", " ", str(value)).strip())
        cte = headers.get("Content-Transfer-Encoding")
        if cte and cte[0].lower() == "quoted-printable":
            del headers["Content-Transfer-Encoding"]
            body = (part.get_payload(decode=True) or b"").decode("utf-8", errors="replace")
        parts.append(([(k, v) for k in sorted(headers) for v in headers[k]], body))
    return parts


def serialize_mime(parts: list[tuple[str | list[tuple[str, str]], str]]) -> str:
    """A multipart MIME archive (boundary ``//``); each part's header is a content type, or its whole header as
    ``[(name, value)]`` (AL2's copied user parts)."""
    out = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for head, body in parts:
        out.append(f"--{MIME_BOUNDARY}")
        if isinstance(head, str):
            out.append(f"Content-Type: {head}")
        else:
            out.extend(f"{k}: {v}" for k, v in head)
        out.append("")
        out.append(body.rstrip("\n"))
    out.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(out) + "\n"


def _user_parts(user_data: str | None, yaml_is_nodeconfig: bool, keep_headers: bool = False) -> list[tuple]:
    """The user's userData as MIME parts: an archive's parts (AL2 ``keep_headers``: each with its whole header;
    AL2023: the content type only, as upstream's ``mime.NewArchive``), else one part."""
    if not user_data or not user_data.strip():
        return []
    if is_mime(user_data):
        return parse_mime_part_headers(user_data) if keep_headers else parse_mime_parts(user_data)
    if yaml_is_nodeconfig:
        try:
            doc = yaml.safe_load(user_data)
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, dict):
            return [(CT_NODECONFIG, user_data)]
    return [(CT_SHELL, user_data)]


# ---------------------------------------------------------------------------------------
# AL2023 (nodeadm NodeConfig)
# ---------------------------------------------------------------------------------------
_AL2023_KUBELET_KEYS = (
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
)


def node_config(cluster: ClusterInfo, labels, taints, kubelet: dict, max_pods: int | None) -> dict:
    cfg: dict[str, Any] = {}
    dns = kubelet.get("clusterDNS") or ([cluster.cluster_dns] if cluster.cluster_dns else [])
    if dns:
        cfg["clusterDNS"] = list(dns)
    mp = max_pods if max_pods is not None else kubelet.get("maxPods")
    if mp is not None:
        cfg["maxPods"] = int(mp)
    for k in _AL2023_KUBELET_KEYS:
        if kubelet.get(k) is not None:
            cfg[k] = kubelet[k]
    # every other KubeletConfiguration field, as given: nodeadm merges NodeConfig's kubelet.config into the kubelet's
    # configuration file (Karpenter v1.15; the other families refuse them: api/kubelet_config.family_problems)
    for k, v in passthrough_fields(kubelet).items():
        if k != "registerWithTaints" and v is not None:
            cfg[k] = v
    if taints:
        cfg["registerWithTaints"] = taints
    kube: dict[str, Any] = {"config": cfg}
    lbl = kubelet_labels(labels)
    if lbl:
        kube["flags"] = [f'--node-labels="{_join_map(lbl, "=")}"']
    spec_cluster = {"name": cluster.name, "apiServerEndpoint": cluster.endpoint}
    if cluster.ca_b64:
        spec_cluster["certificateAuthority"] = cluster.ca_b64
    if cluster.cidr:
        spec_cluster["cidr"] = cluster.cidr
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"cluster": spec_cluster, "kubelet": kube},
    }


def _render_al2023(cluster, labels, taints, kubelet, max_pods, user_data, instance_store_policy=None) -> str:
    cfg = node_config(cluster, labels, taints, kubelet, max_pods)
    if instance_store_policy == RAID0:  # nodeadm assembles the instance-store volumes into a RAID-0 array
        cfg["spec"]["instance"] = {"localStorage": {"strategy": "RAID0"}}
    ours = "# Karpenter Generated NodeConfig\n" + yaml.safe_dump(cfg, sort_keys=True, default_flow_style=False)
    return serialize_mime(_user_parts(user_data, yaml_is_nodeconfig=True) + [(CT_NODECONFIG, ours)])


# ---------------------------------------------------------------------------------------
# AL2 (bootstrap.sh)
# ---------------------------------------------------------------------------------------
def _shq(s: str) -> str:
    if "'" in s:
        raise UserDataError(f"value {s!r} contains a single quote")
    return f"'{s}'"


def bootstrap_command(cluster: ClusterInfo, labels, taints, kubelet: dict, max_pods: int | None,
                      instance_store_policy: str | None = None) -> str:
    lines = [f"/etc/eks/bootstrap.sh {_shq(cluster.name)} --apiserver-endpoint {_shq(cluster.endpoint)}"]
    if cluster.ca_b64:
        lines[0] += f" --b64-cluster-ca {_shq(cluster.ca_b64)}"
    dns = _dns_ip(cluster, kubelet)
    if cluster.family == "ipv6" or (dns and ":" in dns):
        lines.append("--ip-family ipv6")
    if dns:
        lines.append(f"--dns-cluster-ip {_shq(dns)}")
    lines.append("--use-max-pods false")
    args = _kubelet_extra_args(labels, taints, kubelet, max_pods)
    if args:
        lines.append(f"--kubelet-extra-args {_shq(' '.join(args))}")
    if instance_store_policy == RAID0:  # bootstrap.sh's setup-local-disks builds the RAID-0 array
        lines.append("--local-disks raid0")
    return " \\\n".join(lines)


def _render_al2(cluster, labels, taints, kubelet, max_pods, user_data, instance_store_policy=None) -> str:
    script = (
        "#!/bin/bash -xe\n"
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
        + bootstrap_command(cluster, labels, taints, kubelet, max_pods, instance_store_policy)
    )
    return serialize_mime(_user_parts(user_data, yaml_is_nodeconfig=False, keep_headers=True) + [(CT_SHELL, script)])


# ---------------------------------------------------------------------------------------
# Bottlerocket (TOML)
# ---------------------------------------------------------------------------------------
_EPHEMERAL_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")


def _version_in_name(name: str) -> str:
    """The release in a Bottlerocket AMI name (``bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a`` -> ``v1.46.0``):
    the first ``-``-separated word starting with ``v`` that holds a dot; ``""`` when none."""
    for word in (name or "").split("-"):
        if word.startswith("v") and "." in word:
            return word
    return ""


def bottlerocket_version(selector_terms, amis) -> str:
    """The Bottlerocket version an EC2NodeClass launches, as upstream's ``Bottlerocket.resolveAMIVersion``
    (``pkg/providers/amifamily/bottlerocket.go``): the alias's version (``bottlerocket@v1.46.0`` -> ``v1.46.0``,
    ``@latest`` -> ``latest``), else the version in a ``name`` term, else in the name of the resolved AMI an ``id``
    term selects, else in the first resolved AMI named ``*bottlerocket*``; ``""`` when none says.  ``amis``: the
    EC2NodeClass's resolved AMIs (``.id``, ``.name``)."""
    terms = [t for t in (selector_terms or []) if isinstance(t, dict)]
    for t in terms:
        if t.get("alias"):
            parts = str(t["alias"]).split("@")
            if len(parts) == 2 and parts[1]:
                return parts[1]
            break
    for t in terms:
        if t.get("name") and _version_in_name(str(t["name"])):
            return _version_in_name(str(t["name"]))
    named = [(getattr(a, "id", None), getattr(a, "name", "") or "") for a in (amis or [])]
    for t in terms:
        for ami_id, name in named:
            if t.get("id") and ami_id == t["id"] and "bottlerocket" in name and _version_in_name(name):
                return _version_in_name(name)
    for _ami_id, name in named:
        if "bottlerocket" in name and _version_in_name(name):
            return _version_in_name(name)
    return ""


def supports_default_bind(version: str | None) -> bool:
    """Whether a Bottlerocket version's ``apiclient ephemeral-storage bind`` binds the default directories by itself:
    1.46.0 and later, and ``latest`` (upstream ``pkg/providers/version.SupportsDefaultBind``).  ``v`` prefixes are
    ignored; a version without three dot-separated parts, or not numeric, does not."""
    if not version:
        return False
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts[:2]):
        return False
    major, minor = int(parts[0]), int(parts[1])
    return major > 1 or (major == 1 and minor >= 46)


def _render_bottlerocket(cluster, labels, taints, kubelet, max_pods, user_data, instance_store_policy=None,
                         ami_version: str | None = None) -> str:
    try:
        doc = tomllib.loads(user_data) if user_data and user_data.strip() else {}
    except tomllib.TOMLDecodeError as e:
        raise UserDataError(f"spec.userData: invalid Bottlerocket TOML: {e}") from e
    settings = doc.setdefault("settings", {})
    if not isinstance(settings, dict):
        raise UserDataError("spec.userData: settings must be a TOML table")
    autoscaling = settings.get("autoscaling")
    if isinstance(autoscaling, dict) and "should-wait" in autoscaling:
        autoscaling["should-wait"] = False  # no Auto Scaling group: waiting would block the kubelet
    k8s = settings.setdefault("kubernetes", {})
    if not isinstance(k8s, dict):
        raise UserDataError("spec.userData: settings.kubernetes must be a TOML table")
    k8s["cluster-name"] = cluster.name
    k8s["api-server"] = cluster.endpoint
    if cluster.ca_b64:
        k8s["cluster-certificate"] = cluster.ca_b64
    dns = _dns_ip(cluster, kubelet)
    if dns:
        k8s["cluster-dns-ip"] = dns
    mp = max_pods if max_pods is not None else kubelet.get("maxPods")
    if mp is not None:
        k8s["max-pods"] = int(mp)
    node_labels = dict(k8s.get("node-labels") or {})
    node_labels.update(kubelet_labels(labels))
    if node_labels:
        k8s["node-labels"] = node_labels
    node_taints: dict[str, list[str]] = {}
    for t in taints:
        node_taints.setdefault(t["key"], []).append(f"{t.get('value', '')}:{t['effect']}")
    k8s["node-taints"] = node_taints
    for src, dst in (
        ("systemReserved", "system-reserved"),
        ("kubeReserved", "kube-reserved"),
        ("evictionHard", "eviction-hard"),
        ("evictionSoft", "eviction-soft"),
        ("evictionSoftGracePeriod", "eviction-soft-grace-period"),
    ):
        if kubelet.get(src):
            k8s[dst] = {str(k): str(v) for k, v in kubelet[src].items()}
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        k8s["eviction-max-pod-grace-period"] = int(kubelet["evictionMaxPodGracePeriod"])
    if kubelet.get("imageGCHighThresholdPercent") is not None:
        k8s["image-gc-high-threshold-percent"] = str(int(kubelet["imageGCHighThresholdPercent"]))
    if kubelet.get("imageGCLowThresholdPercent") is not None:
        k8s["image-gc-low-threshold-percent"] = str(int(kubelet["imageGCLowThresholdPercent"]))
    if kubelet.get("cpuCFSQuota") is not None:
        k8s["cpu-cfs-quota-enforced"] = bool(kubelet["cpuCFSQuota"])
    if instance_store_policy == RAID0:  # upstream: format and mount the instance store before the kubelet starts
        commands = settings.setdefault("bootstrap-commands", {})
        # Bottlerocket >= 1.46 binds its default directories; older ones are told which (upstream EnableDefaultMountPaths)
        bind = ["apiclient", "ephemeral-storage", "bind"]
        if not supports_default_bind(ami_version):
            bind += ["--dirs", *_EPHEMERAL_DIRS]
        commands["000-mount-instance-storage"] = {
            "commands": [["apiclient", "ephemeral-storage", "init"], bind],
            "mode": "always", "essential": True}
    return dump_toml(doc)


# ---------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------
_PS_OPEN = re.compile(r"^\s*<powershell>\s*", re.I)
_PS_CLOSE = re.compile(r"\s*</powershell>\s*$", re.I)


def _render_windows(cluster, labels, taints, kubelet, max_pods, user_data) -> str:
    lines = ["<powershell>"]
    if user_data and user_data.strip():
        lines.append(_PS_CLOSE.sub("", _PS_OPEN.sub("", user_data)))
    lines.append('[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"')
    cmd = f"& $EKSBootstrapScriptFile -EKSClusterName {_shq(cluster.name)} -APIServerEndpoint {_shq(cluster.endpoint)}"
    if cluster.ca_b64:
        cmd += f" -Base64ClusterCA {_shq(cluster.ca_b64)}"
    args = _kubelet_extra_args(labels, taints, kubelet, max_pods)
    if args:
        cmd += f" -KubeletExtraArgs {_shq(' '.join(args))}"
    dns = _dns_ip(cluster, kubelet)
    if dns:
        cmd += f" -DNSClusterIP {_shq(dns)}"
    lines.append(cmd)
    lines.append("</powershell>")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------
def normalize_family(family: str | None) -> str:
    for f in FAMILIES:
        if family and family.lower() == f.lower():
            return f
    raise UserDataError(f"unknown AMI family {family!r}: expected one of {', '.join(FAMILIES)}")


def render_user_data(
    family: str,
    cluster: ClusterInfo,
    nodeclass=None,
    labels: dict[str, str] | None = None,
    taints: list[dict] | None = None,
    startup_taints: list[dict] | None = None,
    kubelet: dict | None = None,
    max_pods: int | None = None,
    user_data: str | None = None,
    *,
    instance_store_policy: str | None = None,
    ami_version: str | None = None,
) -> str:
    """The node's userData (plain text) for ``family``.

    ``nodeclass`` (an ``EC2NodeClass`` or None) supplies ``spec.userData`` and ``spec.kubelet``
    when ``user_data`` / ``kubelet`` are not given.  ``labels`` are the NodeClaim's labels,
    ``taints`` / ``startup_taints`` the NodePool's; ``max_pods`` the instance type's pod capacity.
    ``instance_store_policy`` ``RAID0`` (the EC2NodeClass's ``instanceStorePolicy``) makes the node build a RAID-0
    array of its instance-store volumes for ephemeral storage: AL2 ``--local-disks raid0``, AL2023 nodeadm
    ``instance.localStorage.strategy: RAID0``, Bottlerocket ``settings.bootstrap-commands`` running ``apiclient
    ephemeral-storage init`` / ``bind`` (plain ``bind`` when ``ami_version``, the EC2NodeClass's Bottlerocket version
    from :func:`bottlerocket_version`, is 1.46 or later or ``latest``; else ``bind --dirs /var/lib/containerd
    /var/lib/kubelet /var/log/pods``); Windows and Custom: nothing (as upstream: a Custom AMI's userData is the
    user's, and the Windows bootstrap has no such option).
    Deterministic: the same input always gives the same bytes (it feeds the launch template hash).
    """
    fam = normalize_family(family)
    if nodeclass is not None:
        spec = nodeclass.spec if hasattr(nodeclass, "spec") else (nodeclass.get("spec") or {})
        if user_data is None:
            user_data = spec.get("userData")
        if kubelet is None:
            kubelet = spec.get("kubelet")
    kubelet = dict(kubelet or {})
    if fam == "Custom":
        return user_data or ""
    if not cluster.name or not cluster.endpoint:
        raise UserDataError("cluster name and endpoint are required to render userData")
    tnts = all_taints(taints, startup_taints)
    labels = dict(labels or {})
    # every family but Custom registers its taints and startup taints itself (above): the Node is labelled so that
    # registration syncs none (upstream launchtemplate.go InjectDoNotSyncTaintsLabel, kubernetes-sigs/karpenter#1772:
    # a startup taint its agent removed must not come back); a Custom AMI's userData is the user's, its taints are
    # synced at registration (controllers/lifecycle.py)
    labels[wk.NODE_DO_NOT_SYNC_TAINTS] = "true"
    policy = RAID0 if instance_store_policy == RAID0 else None
    if fam == "AL2023":
        return _render_al2023(cluster, labels, tnts, kubelet, max_pods, user_data, policy)
    if fam == "AL2":
        return _render_al2(cluster, labels, tnts, kubelet, max_pods, user_data, policy)
    if fam == "Bottlerocket":
        return _render_bottlerocket(cluster, labels, tnts, kubelet, max_pods, user_data, policy, ami_version)
    return _render_windows(cluster, labels, tnts, kubelet, max_pods, user_data)
