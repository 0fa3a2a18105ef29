"""Seed moto (in-process backend) with EKS public AMI SSM parameters and matching images.

moto has no ``/aws/service/eks|bottlerocket|ami-windows-latest`` parameters and refuses
``put_parameter`` under ``/aws``; ``register_image`` ignores architecture and tags and nothing sets
``DeprecationTime``.  This helper writes straight into moto's backends, so it only works where
moto runs in this process (``mock_aws`` or a ``ThreadedMotoServer`` started in-process).
For tests and the simulator only; never used against real AWS.
"""

from __future__ import annotations

import datetime as _dt
import hashlib

from ...api.times import to_datetime
from .amis import alias_parameters

AMAZON_OWNER = "602401143452"  # the EKS AMI publisher account


def _backends(region: str):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends
    from moto.ssm.models import ssm_backends

    return ec2_backends[DEFAULT_ACCOUNT_ID][region], ssm_backends[DEFAULT_ACCOUNT_ID][region], DEFAULT_ACCOUNT_ID


def _image_id(seed: str) -> str:
    return "ami-" + hashlib.sha256(seed.encode()).hexdigest()[:17]


def put_public_parameter(name: str, value: str, region: str = "us-east-1") -> None:
    """Write an SSM parameter even under the reserved ``/aws`` prefix (moto backend)."""
    from moto.ssm.models import Parameter

    _, ssm, account = _backends(region)
    versions = ssm._parameters[name]
    versions.append(
        Parameter(
            account_id=account,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=_dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None),
            version=len(versions) + 1,
            data_type="text",
            tier="Standard",
        )
    )


def add_image(
    region: str = "us-east-1",
    *,
    image_id: str | None = None,
    name: str,
    arch: str = "x86_64",
    owner_id: str | None = None,
    owner_alias: str | None = None,
    creation_date: str | _dt.datetime | None = None,
    deprecation_time: str | None = None,
    tags: dict[str, str] | None = None,
    platform: str | None = None,
) -> str:
    """Register an image in moto with the fields moto's API cannot set (arch, tags, dates, deprecation)."""
    from moto.ec2.models.amis import Ami

    ec2, _, _ = _backends(region)
    image_id = image_id or _image_id(f"{region}/{name}/{arch}")
    if isinstance(creation_date, str):
        creation_date = to_datetime(creation_date)
    ami = Ami(
        ec2,
        image_id,
        name=name,
        owner_id=owner_id,
        owner_alias=owner_alias,
        architecture=arch,
        creation_date=creation_date,
        root_device_name="/dev/xvda",
        root_device_type="ebs",
        virtualization_type="hvm",
        hypervisor="xen",
        platform=platform,
        tags=dict(tags or {}),
    )
    if deprecation_time:
        ami.deprecation_time = deprecation_time
    ec2.amis[image_id] = ami
    return image_id


def seed_eks_amis(
    k8s_version: str = "1.31",
    region: str = "us-east-1",
    families=("al2023", "al2", "bottlerocket", "windows2019", "windows2022", "windows2025"),
    version: str = "latest",
    release: str = "v20250101",
    creation_date: str = "2025-01-01T00:00:00Z",
) -> dict[str, str]:
    """Seed every alias SSM path of ``families`` at ``k8s_version``/``version`` with a matching image.

    Returns ``{ssm path: image id}``.  Image ids are deterministic (hash of the path), names look
    like the real ones (e.g. ``amazon-eks-node-al2023-x86_64-standard-1.31-v20250101``).
    """
    out: dict[str, str] = {}
    for fam in families:
        for path, arch, variants in alias_parameters(fam, k8s_version, version):
            tag = "-".join(variants)
            if fam == "al2023":
                name = f"amazon-eks-node-al2023-{arch}-{variants[0]}-{k8s_version}-{release}"
            elif fam == "al2":
                kind = {"standard": "arm64-" if arch == "arm64" else ""}.get(variants[0], "gpu-")
                name = f"amazon-eks-{kind}node-{k8s_version}-{release}"
            elif fam == "bottlerocket":
                flavor = "-nvidia" if "nvidia" in variants else ""
                name = f"bottlerocket-aws-k8s-{k8s_version}{flavor}-{arch}-{release}"
            else:
                name = f"Windows_Server-{fam[len('windows'):]}-English-Core-EKS_Optimized-{k8s_version}-{release}"
            image_id = _image_id(f"{region}/{path}/{release}")
            add_image(
                region,
                image_id=image_id,
                name=name,
                arch=arch,
                owner_id=AMAZON_OWNER,
                owner_alias="amazon",
                creation_date=creation_date,
                tags={"karpenter-lambda/seeded": tag},
                platform="windows" if fam.startswith("windows") else None,
            )
            put_public_parameter(path, image_id, region)
            out[path] = image_id
    return out
