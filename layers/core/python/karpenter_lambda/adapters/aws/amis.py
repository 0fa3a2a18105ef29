"""AMI discovery for an EC2NodeClass: aliases through SSM public parameters, else selector terms.

* ``alias: <family>@<version>``: the EKS-optimized image ids are read from SSM at the cluster's
  Kubernetes version (``latest`` -> the ``recommended``/``latest`` parameter, else the pinned
  release), then described with ``DescribeImages`` (image-id filter).  Each image carries
  requirements telling which instance types it serves: arch, plus ``standard`` (no GPU, no
  accelerator), ``nvidia`` (``instance-gpu-count`` Exists) or ``neuron``
  (``instance-accelerator-count`` Exists); Windows images add ``kubernetes.io/os=windows`` and
  ``node.kubernetes.io/windows-build``.
* other terms (ORed): ``id`` (image-id filter), ``name`` (name filter, wildcards allowed), ``tags``
  (``*`` = any value), ``owner`` (alias ``self``/``amazon`` or an account id; a name-only term
  defaults to owners self + amazon), ``ssmParameter`` (an SSM parameter holding an image id).
  Requirements: the image's arch (Karpenter v1 dropped v0.x's requirements from an image's tags).
* One AMI per requirement set (karpenter-provider-aws ``pkg/providers/amifamily/ami.go``
  ``(*DefaultProvider).amis``): of the images sharing a requirement set -- for ORed terms, the images of one
  architecture -- only the best is kept (:func:`better_ami`: non-deprecated, then newest ``CreationDate``, then the
  greater name, then the smaller id), so ``tags: {team: a}`` matching v1 and v2 of an x86_64 image keeps v2 alone.
* Order of what is kept (``amifamily/types.go`` ``AMIs.Sort``): newest ``CreationDate`` first, then image id.
  ``ami_for(instance_type)`` takes the first image whose requirements the instance type meets; launch and the
  AMIDrift check both ask it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timezone
from typing import Callable

from ...api import labels as wk
from ...api.times import to_datetime

AWS_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
KUBE_TO_AWS_ARCH = {v: k for k, v in AWS_TO_KUBE_ARCH.items()}
WINDOWS_BUILDS = {"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}

STANDARD = [
    {"key": wk.INSTANCE_ACCELERATOR_COUNT, "operator": "DoesNotExist"},
    {"key": wk.INSTANCE_GPU_COUNT, "operator": "DoesNotExist"},
]
NVIDIA = [{"key": wk.INSTANCE_GPU_COUNT, "operator": "Exists"}]
NEURON = [{"key": wk.INSTANCE_ACCELERATOR_COUNT, "operator": "Exists"}]
VARIANTS = {"standard": STANDARD, "nvidia": NVIDIA, "neuron": NEURON}


class AMIResolutionError(Exception):
    """Raised by the AMI provider for a malformed term; a term matching nothing is not an error."""


@dataclass
class AMI:
    id: str
    name: str
    arch: str  # kubernetes arch: amd64 | arm64
    creation_date: str = ""
    deprecated: bool = False
    deprecation_time: str | None = None
    requirements: list[dict] = field(default_factory=list)  # NodeSelectorRequirements, arch included

    def __getitem__(self, key: str):
        """Dict-style access (``ami["id"]``) for callers treating AMIs as records."""
        return getattr(self, key)

    def to_status(self) -> dict:
        out = {"id": self.id, "name": self.name, "requirements": [dict(r) for r in self.requirements]}
        if self.deprecated:
            out["deprecated"] = True
        return out


# ---------------------------------------------------------------------------------------
# SSM alias paths
# ---------------------------------------------------------------------------------------
def alias_parameters(family: str, k8s_version: str, version: str) -> list[tuple[str, str, list[str]]]:
    """``[(ssm path, aws arch, [variant, ...])]`` for an alias ``family@version`` at ``k8s_version``."""
    fam = family.lower()
    latest = version == "latest"
    if fam == "al2023":
        out = []
        for arch, variants in (("x86_64", ("standard", "nvidia", "neuron")), ("arm64", ("standard", "nvidia"))):
            for v in variants:
                leaf = "recommended" if latest else f"amazon-eks-node-al2023-{arch}-{v}-{k8s_version}-{version}"
                out.append((f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023/{arch}/{v}/{leaf}/image_id", arch, [v]))
        return out
    if fam == "al2":
        def leaf(kind: str) -> str:
            return "recommended" if latest else f"amazon-eks-{kind}node-{k8s_version}-{version}"

        base = f"/aws/service/eks/optimized-ami/{k8s_version}"
        return [
            (f"{base}/amazon-linux-2/{leaf('')}/image_id", "x86_64", ["standard"]),
            (f"{base}/amazon-linux-2-arm64/{leaf('arm64-')}/image_id", "arm64", ["standard"]),
            (f"{base}/amazon-linux-2-gpu/{leaf('gpu-')}/image_id", "x86_64", ["neuron", "nvidia"]),
        ]
    if fam == "bottlerocket":
        v = version.lstrip("v")
        base = f"/aws/service/bottlerocket/aws-k8s-{k8s_version}"
        return [
            (f"{base}/x86_64/{v}/image_id", "x86_64", ["standard", "neuron"]),
            (f"{base}/arm64/{v}/image_id", "arm64", ["standard"]),
            (f"{base}-nvidia/x86_64/{v}/image_id", "x86_64", ["nvidia"]),
            (f"{base}-nvidia/arm64/{v}/image_id", "arm64", ["nvidia"]),
        ]
    if fam.startswith("windows"):
        year = fam[len("windows") :]
        if year not in WINDOWS_BUILDS:
            raise AMIResolutionError(f"unknown Windows alias family {family!r}")
        return [
            (
                f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s_version}/image_id",
                "x86_64",
                ["windows" + year],
            )
        ]
    raise AMIResolutionError(f"unknown alias family {family!r}: expected al2, al2023, bottlerocket, windows2019, windows2022 or windows2025")


def _variant_requirements(variant: str) -> list[dict]:
    if variant.startswith("windows"):
        year = variant[len("windows") :]
        return [
            {"key": wk.OS, "operator": "In", "values": ["windows"]},
            {"key": wk.WINDOWS_BUILD, "operator": "In", "values": [WINDOWS_BUILDS[year]]},
        ]
    return [dict(r) for r in VARIANTS[variant]]


# ---------------------------------------------------------------------------------------
# ordering and matching
# ---------------------------------------------------------------------------------------
def is_deprecated(image: dict, now: float) -> tuple[bool, str | None]:
    dt = image.get("DeprecationTime")
    t = to_datetime(dt) if isinstance(dt, str) else dt
    if t is None:
        return False, None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp() <= now, dt if isinstance(dt, str) else t.isoformat()


def _created(a: AMI) -> float:
    """Creation time in whole seconds (upstream compares ``Unix()``); no date sorts as the oldest."""
    t = to_datetime(a.creation_date) if a.creation_date else None
    return float(int(t.timestamp())) if t else float("-inf")


def sort_amis(amis: list[AMI]) -> list[AMI]:
    """Upstream's ``AMIs.Sort``: newest creation date first, then image id (deprecation plays no part here: it
    decided which image of a requirement set was kept, :func:`one_per_requirements`)."""
    return sorted(amis, key=lambda a: (-_created(a), a.id))


def better_ami(a: AMI, b: AMI) -> bool:
    """Whether ``a`` beats ``b`` for the same requirement set (upstream ``compareAMI``): non-deprecated first, then
    the newer creation date, then the greater name; the smaller id last (upstream keeps whichever DescribeImages
    returned first, which is not reproducible)."""
    if a.deprecated != b.deprecated:
        return not a.deprecated
    if _created(a) != _created(b):
        return _created(a) > _created(b)
    if a.name != b.name:
        return a.name > b.name
    return a.id < b.id


def requirements_key(requirements: list[dict]) -> tuple:
    """A requirement set as a hashable value: order of requirements and of values does not matter."""
    return tuple(sorted((str(r["key"]), str(r["operator"]), tuple(sorted(str(v) for v in r.get("values") or [])))
                        for r in requirements))


def one_per_requirements(amis: list[AMI]) -> list[AMI]:
    """The best AMI (:func:`better_ami`) of each distinct requirement set, in :func:`sort_amis` order."""
    best: dict[tuple, AMI] = {}
    for ami in amis:
        key = requirements_key(ami.requirements)
        have = best.get(key)
        if have is None or better_ami(ami, have):
            best[key] = ami
    return sort_amis(list(best.values()))


def _label_value_present(labels: dict, key: str) -> bool:
    v = labels.get(key)
    if v is None or v == "":
        return False
    if key in (wk.INSTANCE_GPU_COUNT, wk.INSTANCE_ACCELERATOR_COUNT) and str(v) == "0":
        return False
    return True


def requirements_met(requirements: list[dict], labels: dict[str, str]) -> bool:
    """Whether an instance type with ``labels`` is compatible with an AMI's requirements.

    A key the instance type does not define is compatible with In (e.g. windows-build), except
    for Exists; DoesNotExist needs the label absent (count labels of "0" count as absent).
    """
    for r in requirements:
        key, op, values = r["key"], r["operator"], [str(v) for v in r.get("values") or []]
        present = _label_value_present(labels, key)
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op == "In" and present and str(labels[key]) not in values:
            return False
        if op == "NotIn" and present and str(labels[key]) in values:
            return False
    return True


def pick_ami(amis: list[AMI], labels: dict[str, str]) -> AMI | None:
    for ami in amis:
        if requirements_met(ami.requirements, labels):
            return ami
    return None


# ---------------------------------------------------------------------------------------
# the provider
# ---------------------------------------------------------------------------------------
# set when SSM denied GetParameters (a controller role granted ssm:GetParameter only): this process then reads the
# parameters one by one, without asking again
_GET_PARAMETERS_DENIED = False


class AMIProvider:
    """Resolves ``amiSelectorTerms`` to ordered :class:`AMI` lists with boto3 EC2 and SSM clients."""

    def __init__(self, ec2, ssm, k8s_version: str, clock: Callable[[], float] | None = None):
        self.ec2 = ec2
        self.ssm = ssm
        self.k8s_version = str(k8s_version)
        self.clock = clock or time.time
        self.errors: list[str] = []

    # -- SSM -----------------------------------------------------------------------
    def _ssm_get(self, name: str) -> str | None:
        try:
            return self.ssm.get_parameter(Name=name)["Parameter"]["Value"]
        except self.ssm.exceptions.ParameterNotFound:
            return None
        except Exception as e:  # noqa: BLE001 - report, keep resolving the other terms
            code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
            if code in ("ParameterNotFound", "ValidationException"):
                return None
            raise

    def _ssm_get_many(self, names: list[str]) -> dict[str, str]:
        """{name: value} of the parameters that exist, 10 names per GetParameters call (an alias's 4-6 parameters
        in one call instead of one each); a batch SSM rejects is read one name at a time, as before."""
        out: dict[str, str] = {}
        for i in range(0, len(names), 10):
            batch = names[i:i + 10]
            got = self._get_parameters(batch)
            if got is None:
                got = {name: value for name in batch if (value := self._ssm_get(name)) is not None}
            out.update(got)
        return out

    def _get_parameters(self, names: list[str]) -> dict[str, str] | None:
        """One GetParameters call; None when SSM rejects the batch as a whole (a malformed name), or when this
        process's role may not call it (granted ``ssm:GetParameter`` only: not asked again)."""
        global _GET_PARAMETERS_DENIED
        if _GET_PARAMETERS_DENIED:
            return None
        try:
            got = self.ssm.get_parameters(Names=names)
        except Exception as e:  # noqa: BLE001 - the caller reads the names one by one
            code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
            if code in ("AccessDenied", "AccessDeniedException"):
                _GET_PARAMETERS_DENIED = True
                return None
            if code == "ValidationException":
                return None
            raise
        return {p["Name"]: p["Value"] for p in got.get("Parameters") or []}

    def _describe(self, **kwargs) -> list[dict]:
        kwargs.setdefault("IncludeDeprecated", True)
        return self.ec2.describe_images(**kwargs).get("Images", [])

    def _to_ami(self, image: dict, extra_requirements: list[dict] | None) -> AMI | None:
        arch = AWS_TO_KUBE_ARCH.get(image.get("Architecture") or "")
        if arch is None:
            return None  # only well-known architectures
        reqs = [{"key": wk.ARCH, "operator": "In", "values": [arch]}] + list(extra_requirements or [])
        deprecated, dt = is_deprecated(image, self.clock())
        cd = image.get("CreationDate") or ""
        if not isinstance(cd, str):
            cd = cd.isoformat()
        return AMI(
            id=image["ImageId"],
            name=image.get("Name") or "",
            arch=arch,
            creation_date=cd,
            deprecated=deprecated,
            deprecation_time=dt,
            requirements=reqs,
        )

    # -- alias ---------------------------------------------------------------------
    def resolve_alias(self, alias: str) -> list[AMI]:
        if "@" not in alias:
            raise AMIResolutionError(f"alias {alias!r} must be family@version")
        family, version = alias.split("@", 1)
        ids: dict[str, list[tuple[str, str]]] = {}  # image id -> [(aws arch, variant)]
        params = alias_parameters(family, self.k8s_version, version)
        values = self._ssm_get_many(list(dict.fromkeys(path for path, _a, _v in params)))
        for path, arch, variants in params:
            image_id = values.get(path)
            if image_id:
                for v in variants:
                    ids.setdefault(image_id, []).append((arch, v))
        if not ids:
            self.errors.append(f"failed to discover any AMIs for alias {alias} (kubernetes {self.k8s_version})")
            return []
        images = {im["ImageId"]: im for im in self._describe(Filters=[{"Name": "image-id", "Values": sorted(ids)}])}
        out = []
        for image_id, pairs in ids.items():
            image = images.get(image_id)
            if image is None:
                self.errors.append(f"image {image_id} from alias {alias} not found by DescribeImages")
                continue
            for _aws_arch, variant in pairs:
                ami = self._to_ami(image, _variant_requirements(variant))
                if ami:
                    out.append(ami)
        return one_per_requirements(out)

    # -- selector terms --------------------------------------------------------------
    def _term_query(self, term: dict) -> dict | None:
        filters = []
        owners = None
        if term.get("id"):
            return {"Filters": [{"Name": "image-id", "Values": [term["id"]]}]}
        if term.get("ssmParameter"):
            # the parameter's image alone, as upstream's DescribeImageQueries: name, tags and owner beside it are not
            # applied (validate warns: api/nodeclass_hints.py); a value that is not an image id selects nothing
            image_id = self._ssm_get(term["ssmParameter"])
            if not image_id:
                self.errors.append(f"SSM parameter {term['ssmParameter']} not found")
                return None
            if not str(image_id).startswith("ami-"):
                self.errors.append(f"SSM parameter {term['ssmParameter']} holds {image_id!r}, not an AMI id")
                return None
            return {"Filters": [{"Name": "image-id", "Values": [str(image_id)]}]}
        if term.get("name"):
            filters.append({"Name": "name", "Values": [term["name"]]})
        for k, v in sorted((term.get("tags") or {}).items()):
            if v == "*":
                filters.append({"Name": "tag-key", "Values": [k]})
            else:
                filters.append({"Name": f"tag:{k}", "Values": [v]})
        if term.get("owner"):
            owners = [term["owner"]]
        elif term.get("name"):
            owners = ["self", "amazon"]
        if not filters and not owners:
            raise AMIResolutionError(f"amiSelectorTerms term {term!r} selects nothing: set id, name, tags, owner or ssmParameter")
        q: dict = {}
        if filters:
            q["Filters"] = filters
        if owners:
            q["Owners"] = owners
        return q

    def resolve_terms(self, terms: list[dict]) -> list[AMI]:
        seen: dict[str, AMI] = {}
        for term in terms:
            q = self._term_query(term)
            if q is None:
                continue
            for image in self._describe(**q):
                if image.get("State") not in (None, "available"):
                    continue
                ami = self._to_ami(image, None)
                if ami and ami.id not in seen:
                    seen[ami.id] = ami
        return one_per_requirements(list(seen.values()))

    def resolve(self, terms: list[dict]) -> list[AMI]:
        """AMIs for ``amiSelectorTerms`` (alias or ORed terms): one per requirement set, ordered; ``self.errors`` says
        why when empty."""
        self.errors = []
        if not terms:
            raise AMIResolutionError("amiSelectorTerms is empty")
        aliases = [t["alias"] for t in terms if t.get("alias")]
        if aliases:
            if len(terms) != 1:
                raise AMIResolutionError("amiSelectorTerms: an alias term must be the only term")
            return self.resolve_alias(aliases[0])
        return self.resolve_terms(terms)
