"""Cluster connection facts from ``eks:DescribeCluster``."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ClusterInfo", "ClusterNotReady", "get_cluster_info"]


class ClusterNotReady(RuntimeError):
    """The cluster exists but has no endpoint / CA yet (still CREATING) or is not ACTIVE."""


class ClusterInfo(NamedTuple):
    endpoint: str
    ca_data_b64: str
    k8s_version: str
    service_cidr: str | None


def get_cluster_info(eks_client, name: str) -> ClusterInfo:
    """``(endpoint, ca_data_b64, k8s_version, service_cidr)`` of cluster ``name``.

    ``service_cidr`` is the IPv4 service CIDR, or the IPv6 one for an IPv6
    cluster, or None when EKS does not report it.  Raises ``ValueError`` for an
    empty name, :class:`ClusterNotReady` when the endpoint or CA is missing,
    and lets botocore's ``ResourceNotFoundException`` through for an unknown cluster.
    """
    if not name:
        raise ValueError("cluster name is required")
    c = eks_client.describe_cluster(name=name)["cluster"]
    endpoint = c.get("endpoint")
    ca = (c.get("certificateAuthority") or {}).get("data")
    status = c.get("status", "ACTIVE")
    if not endpoint or not ca:
        raise ClusterNotReady(f"cluster {name}: status {status}, endpoint/certificateAuthority not available yet")
    net = c.get("kubernetesNetworkConfig") or {}
    cidr = net.get("serviceIpv4Cidr") if net.get("ipFamily", "ipv4") != "ipv6" else net.get("serviceIpv6Cidr")
    return ClusterInfo(endpoint, ca, str(c.get("version") or ""), cidr or net.get("serviceIpv4Cidr"))
