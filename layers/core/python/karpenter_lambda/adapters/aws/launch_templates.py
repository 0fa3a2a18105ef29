"""Launch templates named by a hash of their resolved options (create or reuse).

Name: ``karpenter.k8s.aws/<decimal hash>`` where the hash is the first 64 bits of SHA-256 over
the canonical JSON of :class:`LaunchTemplateOptions` (sorted keys; security groups sorted; tags
as a sorted mapping).  Equal options -> equal name -> the template is reused; any difference
(AMI, userData incl. maxPods/labels/taints, security groups, profile, block devices, metadata
options, tags, capacity type) -> a new template.  Karpenter does the same with hashstructure.

``LaunchTemplates(ec2, cluster_name).ensure(options)`` returns ``{"name", "id"}``:
describe by name -> reuse; ``InvalidLaunchTemplateName.NotFoundException`` -> create; a concurrent
creator's ``InvalidLaunchTemplateName.AlreadyExistsException`` -> describe again and reuse.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Iterable

from ...api import labels as wk
from ...api.quantity import parse_quantity
from .userdata import ClusterInfo, bottlerocket_version, normalize_family, render_user_data

LT_NAME_PREFIX = "karpenter.k8s.aws/"
NOT_FOUND = ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateName.NotFound")
ALREADY_EXISTS = "InvalidLaunchTemplateName.AlreadyExistsException"


def ec2_block_device_mappings(mappings: Iterable[dict]) -> list[dict]:
    """CRD-shaped ``blockDeviceMappings`` -> EC2 ``BlockDeviceMappings`` (VolumeSize in GiB, rounded up)."""
    out = []
    for m in mappings or []:
        ebs = m.get("ebs") or {}
        e: dict = {}
        if ebs.get("volumeSize") is not None:
            q = parse_quantity(ebs["volumeSize"])
            gib = -(-q // (2**30))
            e["VolumeSize"] = int(gib)
        for src, dst in (("volumeType", "VolumeType"), ("kmsKeyID", "KmsKeyId"), ("snapshotID", "SnapshotId")):
            if ebs.get(src):
                e[dst] = ebs[src]
        for src, dst in (("iops", "Iops"), ("throughput", "Throughput"), ("volumeInitializationRate", "VolumeInitializationRate")):
            if ebs.get(src):
                e[dst] = int(ebs[src])
        for src, dst in (("encrypted", "Encrypted"), ("deleteOnTermination", "DeleteOnTermination")):
            if ebs.get(src) is not None:
                e[dst] = bool(ebs[src])
        out.append({"DeviceName": m["deviceName"], "Ebs": e})
    return out


def ec2_metadata_options(opts: dict) -> dict:
    return {
        "HttpEndpoint": opts.get("httpEndpoint", "enabled"),
        "HttpProtocolIpv6": opts.get("httpProtocolIPv6", "disabled"),
        "HttpPutResponseHopLimit": int(opts.get("httpPutResponseHopLimit", 1)),
        "HttpTokens": opts.get("httpTokens", "required"),
        "InstanceMetadataTags": "disabled",
    }


@dataclass
class LaunchTemplateOptions:
    """Everything that goes into one launch template (the hash input)."""

    cluster_name: str
    nodeclass_name: str
    image_id: str
    user_data: str  # plain text; base64-encoded on create
    instance_profile: str | None
    security_group_ids: list[str]
    block_device_mappings: list[dict] = field(default_factory=list)  # EC2 shape
    metadata_options: dict = field(default_factory=dict)  # EC2 shape
    tags: dict = field(default_factory=dict)  # EC2NodeClass tags
    capacity_type: str | None = None
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool = False
    ip_prefix_count: int | None = None
    ipv6: bool = False  # the cluster is IPv6: a primary IPv6 address, and ipPrefixCount counts IPv6 prefixes
    #: a ``reserved`` launch: the capacity reservation the template targets, and its type (``capacity-block``: the
    #: instance market type is ``capacity-block``)
    capacity_reservation_id: str | None = None
    capacity_reservation_type: str | None = None
    placement_group_id: str | None = None
    placement_partition: int | None = None
    #: EFA interfaces to attach (the instance type's ``vpc.amazonaws.com/efa`` when the NodeClaim requests EFA), else 0
    efa_count: int = 0

    def canonical(self) -> str:
        d = asdict(self)
        if not d["efa_count"]:
            del d["efa_count"]   # templates without EFA keep the names they had before the field existed
        d["security_group_ids"] = sorted(d["security_group_ids"])
        d["tags"] = dict(sorted(d["tags"].items()))
        # what the template asks of its network interface, so a template made before that changed is not reused
        d["network_interfaces"] = self.network_interfaces()
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    def network_interfaces(self) -> list[dict]:
        """The template's ``NetworkInterfaces``, as upstream's ``generateNetworkInterfaces``
        (``pkg/providers/launchtemplate/launchtemplate.go``; EC2NodeClass ``networkInterfaces`` is refused by
        validation): one primary interface, ``DeviceIndex`` 0, the security groups as ``Groups``,
        ``AssociatePublicIpAddress`` when the EC2NodeClass sets it, ``ipPrefixCount`` as ``Ipv4PrefixCount``
        (``Ipv6PrefixCount`` on an IPv6 cluster), and on an IPv6 cluster ``PrimaryIpv6`` with ``Ipv6AddressCount`` 1;
        with ``efa_count`` n, n interfaces of ``InterfaceType`` ``efa`` instead, one per network card
        (``NetworkCardIndex`` i; ``DeviceIndex`` 0 on the first card, 1 on the others), each with those fields."""
        def eni(card: int | None) -> dict:
            out: dict = {"DeviceIndex": 0 if not card else 1, "Groups": sorted(self.security_group_ids)}
            if card is not None:
                out["NetworkCardIndex"] = card
                out["InterfaceType"] = "efa"
            if self.associate_public_ip_address is not None:
                out["AssociatePublicIpAddress"] = bool(self.associate_public_ip_address)
            if self.ip_prefix_count is not None:
                out["Ipv6PrefixCount" if self.ipv6 else "Ipv4PrefixCount"] = int(self.ip_prefix_count)
            if self.ipv6:
                out["PrimaryIpv6"] = True
                out["Ipv6AddressCount"] = 1
            return out
        if self.efa_count:
            return [eni(i) for i in range(self.efa_count)]
        return [eni(None)]

    def hash(self) -> str:
        return str(int(hashlib.sha256(self.canonical().encode()).hexdigest()[:16], 16))

    @property
    def name(self) -> str:
        return LT_NAME_PREFIX + self.hash()


@dataclass(frozen=True)
class LaunchTemplateRef:
    name: str
    id: str
    image_id: str


def options_for(
    resolved,
    cluster: ClusterInfo,
    ami,
    labels: dict[str, str] | None,
    taints: list[dict] | None,
    startup_taints: list[dict] | None,
    max_pods: int | None,
    capacity_type: str | None = None,
    reservation: tuple[str, str] | None = None,
    placement_partition: int | None = None,
    ami_selector_terms: list | None = None,
    efa_count: int = 0,
) -> LaunchTemplateOptions:
    """Options for one launch template from a :class:`ResolvedNodeClass`, an AMI and the NodeClaim's labels/taints.
    ``reservation``: ``(capacity reservation id, reservation type)`` of a ``reserved`` launch.
    ``ami_selector_terms``: the EC2NodeClass's ``spec.amiSelectorTerms``; with its resolved AMIs they give a
    Bottlerocket node's version (:func:`~.userdata.bottlerocket_version`, the instance-store bind command)."""
    image_id = ami if isinstance(ami, str) else ami.id
    family = resolved.ami_family or "Custom"
    ami_version = None
    if normalize_family(family) == "Bottlerocket":
        ami_version = bottlerocket_version(ami_selector_terms, getattr(resolved, "amis", None)) or None
    ud = render_user_data(
        family,
        cluster,
        None,
        labels,
        taints,
        startup_taints,
        resolved.kubelet,
        max_pods,
        resolved.user_data,
        instance_store_policy=getattr(resolved, "instance_store_policy", None),
        ami_version=ami_version,
    )
    pg = getattr(resolved, "placement_group", None)
    return LaunchTemplateOptions(
        cluster_name=cluster.name,
        nodeclass_name=resolved.name,
        image_id=image_id,
        user_data=ud,
        instance_profile=resolved.instance_profile,
        security_group_ids=list(resolved.security_group_ids),
        block_device_mappings=ec2_block_device_mappings(resolved.block_device_mappings),
        metadata_options=ec2_metadata_options(resolved.metadata_options),
        tags=dict(resolved.tags),
        capacity_type=capacity_type,
        associate_public_ip_address=resolved.associate_public_ip_address,
        detailed_monitoring=bool(resolved.detailed_monitoring),
        ip_prefix_count=getattr(resolved, "ip_prefix_count", None),
        ipv6=cluster.family == "ipv6",
        capacity_reservation_id=reservation[0] if reservation else None,
        capacity_reservation_type=reservation[1] if reservation else None,
        placement_group_id=pg.id if pg is not None else None,
        placement_partition=placement_partition if pg is not None else None,
        efa_count=int(efa_count or 0),
    )


def reservation_fields(options: LaunchTemplateOptions) -> dict:
    """``CapacityReservationSpecification`` (and ``InstanceMarketOptions`` for a capacity block), as upstream with its
    ``ReservedCapacity`` gate on (its default): a ``reserved`` template targets its reservation only
    (``capacity-reservations-only``); an on-demand or spot one opts out of open reservations (``none``), so only
    launches the catalog counted as reserved use reserved capacity."""
    if options.capacity_type == wk.CAPACITY_TYPE_RESERVED and options.capacity_reservation_id:
        out: dict = {"CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": options.capacity_reservation_id}}}
        if options.capacity_reservation_type == "capacity-block":
            out["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        return out
    return {"CapacityReservationSpecification": {"CapacityReservationPreference": "none"}}


def _code(e: Exception) -> str:
    return ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")


class LaunchTemplates:
    """Creates or reuses launch templates in one cluster; remembers names it has seen in this process."""

    def __init__(self, ec2, cluster_name: str):
        self.ec2 = ec2
        self.cluster_name = cluster_name
        self._cache: dict[str, str] = {}
        self.created = 0  # templates this instance created (for tests / metrics)

    def tags_for(self, options: LaunchTemplateOptions) -> dict[str, str]:
        tags = dict(options.tags)
        tags.update(
            {
                f"kubernetes.io/cluster/{self.cluster_name}": "owned",
                "eks:eks-cluster-name": self.cluster_name,
                wk.EC2NODECLASS: options.nodeclass_name,
                "karpenter.sh/cluster": self.cluster_name,
                wk.OWNER_TAG: self.cluster_name,
            }
        )
        return tags

    def request(self, options: LaunchTemplateOptions) -> dict:
        """The exact ``CreateLaunchTemplate`` parameters for ``options``."""
        tags = [{"Key": k, "Value": v} for k, v in sorted(self.tags_for(options).items())]
        data: dict = {
            "ImageId": options.image_id,
            "UserData": base64.b64encode(options.user_data.encode()).decode(),
            "MetadataOptions": options.metadata_options or ec2_metadata_options({}),
            "Monitoring": {"Enabled": bool(options.detailed_monitoring)},
            "TagSpecifications": [{"ResourceType": "network-interface", "Tags": tags}],
        }
        if options.capacity_type == "spot":
            data["TagSpecifications"].append({"ResourceType": "spot-instances-request", "Tags": tags})
        if options.instance_profile:
            data["IamInstanceProfile"] = {"Name": options.instance_profile}
        if options.block_device_mappings:
            data["BlockDeviceMappings"] = options.block_device_mappings
        data["NetworkInterfaces"] = options.network_interfaces()  # the security groups are on the interface
        data.update(reservation_fields(options))
        if options.placement_group_id:
            data["Placement"] = {"GroupId": options.placement_group_id}
            if options.placement_partition:
                data["Placement"]["PartitionNumber"] = int(options.placement_partition)
        return {
            "LaunchTemplateName": options.name,
            "LaunchTemplateData": data,
            "TagSpecifications": [{"ResourceType": "launch-template", "Tags": tags}],
        }

    def _describe(self, name: str) -> dict | None:
        try:
            lts = self.ec2.describe_launch_templates(LaunchTemplateNames=[name]).get("LaunchTemplates", [])
        except Exception as e:  # noqa: BLE001
            if _code(e) in NOT_FOUND:
                return None
            raise
        return lts[0] if lts else None

    def ensure(self, options: LaunchTemplateOptions) -> dict:
        """``{"name", "id"}`` of the template for ``options``, creating it when missing."""
        name = options.name
        if name in self._cache:
            return {"name": name, "id": self._cache[name]}
        lt = self._describe(name)
        if lt is None:
            try:
                lt = self.ec2.create_launch_template(**self.request(options))["LaunchTemplate"]
                self.created += 1
            except Exception as e:  # noqa: BLE001
                if _code(e) != ALREADY_EXISTS:
                    raise
                lt = self._describe(name)  # another invocation created it first
                if lt is None:
                    raise
        self._cache[name] = lt["LaunchTemplateId"]
        return {"name": name, "id": lt["LaunchTemplateId"]}

    def ensure_for(
        self,
        resolved,
        cluster: ClusterInfo,
        instance_types,
        labels: dict[str, str] | None,
        taints: list[dict] | None = None,
        startup_taints: list[dict] | None = None,
        capacity_type: str | None = None,
        reservation: tuple[str, str] | None = None,
        placement_partition: int | None = None,
        ami_selector_terms: list | None = None,
        efa: bool = False,
    ) -> dict[str, LaunchTemplateRef]:
        """``{instance type name: LaunchTemplateRef}`` for catalog ``InstanceType`` objects.

        One template per distinct (AMI, max pods, EFA interfaces) as Karpenter does; max pods is the instance
        type's ``capacity["pods"]``, the EFA interfaces its ``vpc.amazonaws.com/efa`` when ``efa`` (the NodeClaim
        requests EFA), else none.  ``ami_selector_terms``: the EC2NodeClass's (see :func:`options_for`).
        Instance types no AMI serves are left out.  A ``reserved`` launch asks once per capacity reservation (``reservation``: its id and type; one template per reservation, as upstream).
        """
        out: dict[str, LaunchTemplateRef] = {}
        made: dict[tuple[str, int | None, int], LaunchTemplateRef] = {}
        for it in instance_types:
            ami = resolved.ami_for(it)
            if ami is None:
                continue
            pods = it.capacity.get("pods") if hasattr(it, "capacity") else None
            efas = int(it.capacity.get(wk.RESOURCE_EFA, 0)) if efa and hasattr(it, "capacity") else 0
            key = (ami.id, pods, efas)
            if key not in made:
                opts = options_for(resolved, cluster, ami, labels, taints, startup_taints, pods, capacity_type,
                                   reservation, placement_partition, ami_selector_terms, efas)
                lt = self.ensure(opts)
                made[key] = LaunchTemplateRef(name=lt["name"], id=lt["id"], image_id=ami.id)
            out[it.name] = made[key]
        return out

    def owned(self) -> list[dict]:
        """This deployment's templates (tagged :data:`~karpenter_lambda.api.labels.OWNER_TAG` = the cluster):
        ``[{"id", "name", "nodeclass"}]``.  Upstream Karpenter's templates (same name prefix) are never listed."""
        out = []
        paginator = self.ec2.get_paginator("describe_launch_templates")
        for page in paginator.paginate(Filters=[{"Name": f"tag:{wk.OWNER_TAG}", "Values": [self.cluster_name]}]):
            for lt in page.get("LaunchTemplates", []):
                tags = {t["Key"]: t["Value"] for t in lt.get("Tags") or []}
                out.append({"id": lt["LaunchTemplateId"], "name": lt["LaunchTemplateName"],
                            "nodeclass": tags.get(wk.EC2NODECLASS)})
        return out

    def delete_for_nodeclass(self, nodeclass_name: str) -> list[str]:
        """Delete this deployment's templates for an EC2NodeClass (on its deletion); returns deleted names."""
        deleted = []
        paginator = self.ec2.get_paginator("describe_launch_templates")
        filters = [
            {"Name": f"tag:{wk.EC2NODECLASS}", "Values": [nodeclass_name]},
            {"Name": f"tag:{wk.OWNER_TAG}", "Values": [self.cluster_name]},
        ]
        for page in paginator.paginate(Filters=filters):
            for lt in page.get("LaunchTemplates", []):
                try:
                    self.ec2.delete_launch_template(LaunchTemplateId=lt["LaunchTemplateId"])
                except Exception as e:  # noqa: BLE001
                    if _code(e) not in NOT_FOUND:
                        raise
                self._cache.pop(lt["LaunchTemplateName"], None)
                deleted.append(lt["LaunchTemplateName"])
        return deleted
