"""Save a finished simulation to a directory, and serve it again so the read-only commands can look at it offline.

``simulate --save-state DIR`` calls :func:`save_state` at the end of the run (inside moto, while the local Kubernetes
API still holds the cluster) and writes, as JSON:

- ``state.json``: ``{"cluster", "region", "k8sVersion", "time", "stateTable", "items", "cacheTable", "cacheItems",
  "functionEnv"}``: every item of the DynamoDB state table (NodePools, EC2NodeClasses, NodeClaims, ... as
  adapters/store/state.py stores them) and of the cache table (offerings marked unavailable, cached prices),
  DynamoDB-typed; ``functionEnv``: the deployment settings the run's functions had (``simulate
  --vm-memory-overhead-percent`` / ``--reserved-enis``), given to the commands again;
- ``kube.json``: ``{plural: [object, ...]}``: the objects of the local Kubernetes API (nodes, pods, daemonsets, PDBs,
  workloads, ...);
- ``ec2.json``: ``{"instances", "ids", "vpcs", "subnets", "securityGroups", "images", "ssmParameters", "iamRoles",
  "instanceProfiles"}``: the EC2 instances (DescribeInstances) at the end of the run, and everything an EC2NodeClass
  is resolved against, as the run left it: VPCs, subnets (with their free IPs), security groups and images with their
  tags, every SSM parameter (the EKS AMI aliases, including releases a Scenario published), IAM roles and instance
  profiles.

:func:`serve_state` starts in-process moto and a local Kubernetes API seeded from DIR, points the environment at them
(as the simulator does: ``SimAccount.environment()`` plus ``KARPENTER_LAMBDA_KUBE_ENDPOINT``), sets the clock to the
simulation's end, and undoes all of it on exit.  The commands then run unchanged (``--state DIR``).  The saved
VPCs, subnets and security groups are re-created with their saved ids, the images and SSM parameters as they were,
so an EC2NodeClass resolves to exactly what the run's last sweep saw (nothing shows as drifted that the run did not
drift).  A DIR saved before those keys existed is seeded as ``simulate`` seeds a new account, with the saved subnet,
security-group and AMI ids mapped to the new ones (a Scenario's AMI releases are then missing).
"""

from __future__ import annotations

import ast
import base64
import binascii
import contextlib
import json
import os
import re
from pathlib import Path

import boto3
from moto import mock_aws

from ..adapters.aws import ssm_seed
from ..api.manifests import load_text
from ..controllers import environment, runtime
from . import moto_ec2
from .aws import SimAccount
from .clock import VirtualClock
from .kubeapi import RESOURCES, KubeAPIServer
from .kubeapi.resources import StoreError

FILES = ("state.json", "kube.json", "ec2.json")
WORLD_KEYS = ("vpcs", "subnets", "securityGroups", "images", "ssmParameters")   # ec2.json: saved by this version


class StateDirError(Exception):
    """DIR is not a saved simulation (missing or unreadable files)."""


def _scan(ddb, table: str, missing_ok: bool = False) -> list[dict]:
    items: list[dict] = []
    kwargs: dict = {"TableName": table}
    while True:
        try:
            page = ddb.scan(**kwargs)
        except ddb.exceptions.ResourceNotFoundException:
            if missing_ok:
                return items
            raise
        items.extend(page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _wire(value, decode: bool = False):
    """A DynamoDB-typed attribute value with its binaries as base64 text (DynamoDB's JSON wire format), or back."""
    if isinstance(value, list):
        return [_wire(v, decode) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for t, v in value.items():
        if t == "B":
            out[t] = _unb64(v) if decode else base64.b64encode(v).decode("ascii")
        elif t == "BS":
            out[t] = [_unb64(x) if decode else base64.b64encode(x).decode("ascii") for x in v]
        elif t in ("M", "L"):
            out[t] = {k: _wire(x, decode) for k, x in v.items()} if t == "M" else [_wire(x, decode) for x in v]
        else:
            out[t] = v
    return out


def _unb64(text) -> bytes:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        if text.startswith(("b'", 'b"')):   # an older save wrote bytes as their repr
            with contextlib.suppress(ValueError, SyntaxError):
                return ast.literal_eval(text)
        return text.encode("utf-8")


def _items_out(items: list[dict]) -> list[dict]:
    return [{k: _wire(v) for k, v in item.items()} for item in items]


def _items_in(items: list[dict]) -> list[dict]:
    return [{k: _wire(v, decode=True) for k, v in item.items()} for item in items]


def save_state(sim, directory: str | os.PathLike) -> list[Path]:
    """Write the simulation's DynamoDB state, Kubernetes objects and EC2 world to ``directory`` (created)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    account = sim.account
    ddb = boto3.client("dynamodb", region_name=sim.region)
    kube = {plural: sim.server.store.list(plural) for plural in RESOURCES}
    kube = {k: v for k, v in kube.items() if v and k != "events"}
    ec2 = boto3.client("ec2", region_name=sim.region)
    instances = moto_ec2.all_instances(ec2)
    docs = {
        "state.json": {"cluster": sim.cluster, "region": sim.region, "k8sVersion": sim.k8s_version,
                       "time": sim.clock.now(), "stateTable": account.state_table,
                       "items": _items_out(_scan(ddb, account.state_table)),
                       "cacheTable": account.cache_table, "cacheItems": _items_out(_scan(ddb, account.cache_table, missing_ok=True)),
                       "functionEnv": dict(getattr(sim, "function_env", None) or {})},
        "kube.json": kube,
        "ec2.json": {"instances": instances, "ids": _ec2_ids(ec2), **_world(sim.region)},
    }
    written = []
    for name, doc in docs.items():
        p = out / name
        p.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
        written.append(p)
    return written


def _ec2_ids(ec2) -> dict[str, str]:
    """Stable name -> id of what SimAccount creates (subnets by zone, security groups by name, images by name), so a
    served state can map the saved ids to the ones a new moto gives (moto picks ids at random)."""
    ids = {f"subnet:{s['AvailabilityZone']}": s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]
           if not s.get("DefaultForAz")}
    ids.update({f"sg:{g['GroupName']}": g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]
                if g["GroupName"] != "default"})
    ids.update({f"ami:{i['Name']}": i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"] if i.get("Name")})
    ids.update({f"vpc:{v['CidrBlock']}": v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")})
    return ids


def _tags(obj: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in obj.get("Tags") or []}


def _world(region: str) -> dict:
    """What EC2NodeClass resolution reads (subnets, security groups, images, SSM parameters, IAM), as the API shows it."""
    ec2, ssm, iam = (boto3.client(s, region_name=region) for s in ("ec2", "ssm", "iam"))
    vpcs = [{"VpcId": v["VpcId"], "CidrBlock": v["CidrBlock"], "Tags": _tags(v)}
            for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")]
    own = {v["VpcId"] for v in vpcs}
    subnets = [{"SubnetId": s["SubnetId"], "VpcId": s["VpcId"], "CidrBlock": s["CidrBlock"],
                "AvailabilityZone": s["AvailabilityZone"], "AvailableIpAddressCount": s.get("AvailableIpAddressCount"),
                "Tags": _tags(s)} for s in ec2.describe_subnets()["Subnets"] if s["VpcId"] in own]
    groups = [{"GroupId": g["GroupId"], "GroupName": g["GroupName"], "Description": g.get("Description") or "-",
               "VpcId": g.get("VpcId"), "Tags": _tags(g)} for g in ec2.describe_security_groups()["SecurityGroups"]
              if g.get("VpcId") in own and g["GroupName"] != "default"]
    images = [{"ImageId": i["ImageId"], "Name": i.get("Name"), "Architecture": i.get("Architecture"),
               "OwnerId": i.get("OwnerId"), "ImageOwnerAlias": i.get("ImageOwnerAlias"),
               "CreationDate": i.get("CreationDate"), "DeprecationTime": i.get("DeprecationTime"),
               "Platform": i.get("Platform"), "Tags": _tags(i)} for i in ec2.describe_images()["Images"]]
    params = []
    for page in ssm.get_paginator("get_parameters_by_path").paginate(Path="/", Recursive=True, WithDecryption=True):
        params.extend({"Name": p["Name"], "Value": p["Value"], "Type": p.get("Type"), "Version": p.get("Version")}
                      for p in page["Parameters"])
    roles = [{"RoleName": r["RoleName"], "Path": r.get("Path") or "/",
              "AssumeRolePolicyDocument": r.get("AssumeRolePolicyDocument")}
             for page in iam.get_paginator("list_roles").paginate() for r in page["Roles"]]
    profiles = [{"InstanceProfileName": p["InstanceProfileName"], "Path": p.get("Path") or "/",
                 "Roles": [r["RoleName"] for r in p.get("Roles") or []], "Tags": _tags(p)}
                for page in iam.get_paginator("list_instance_profiles").paginate() for p in page["InstanceProfiles"]]
    return {"vpcs": vpcs, "subnets": subnets, "securityGroups": groups, "images": images, "ssmParameters": params,
            "iamRoles": roles, "instanceProfiles": profiles}


@contextlib.contextmanager
def _fixed_id(module, function: str, new_id: str):
    """moto picks resource ids at random: for one create call, it returns ``new_id`` (the saved one)."""
    original = getattr(module, function)
    setattr(module, function, lambda *a, **k: new_id)
    try:
        yield
    finally:
        setattr(module, function, original)


def _restore_world(state: dict, world: dict, kube_url: str) -> SimAccount:
    """Re-create, with their saved ids and tags, the VPCs, subnets, security groups, images, SSM parameters and IAM
    objects of the run; then the rest of the simulated account (EKS cluster, tables, queues) as ``simulate`` does."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends, security_groups, subnets, vpcs

    region = state["region"]
    account = SimAccount(state["cluster"], region, state.get("k8sVersion") or "1.31",
                         state_table=state.get("stateTable") or SimAccount.state_table,
                         cache_table=state.get("cacheTable") or SimAccount.cache_table)
    ec2, iam = boto3.client("ec2", region_name=region), boto3.client("iam", region_name=region)
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]

    def tag(rid: str, tags: dict) -> None:
        if tags:
            ec2.create_tags(Resources=[rid], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])

    for v in world.get("vpcs") or []:
        with _fixed_id(vpcs, "random_vpc_id", v["VpcId"]):
            ec2.create_vpc(CidrBlock=v["CidrBlock"])
        tag(v["VpcId"], v.get("Tags"))
        account.vpc_id = account.vpc_id or v["VpcId"]
    for s in world.get("subnets") or []:
        with _fixed_id(subnets, "random_subnet_id", s["SubnetId"]):
            ec2.create_subnet(VpcId=s["VpcId"], CidrBlock=s["CidrBlock"], AvailabilityZone=s["AvailabilityZone"])
        tag(s["SubnetId"], s.get("Tags"))
        if s.get("AvailableIpAddressCount") is not None:   # the run's instances took addresses; none run here
            sub = backend.get_subnet(s["SubnetId"])
            sub._available_ip_addresses += int(s["AvailableIpAddressCount"]) - sub.available_ip_address_count
        account.subnet_ids.append(s["SubnetId"])
    for g in world.get("securityGroups") or []:
        with _fixed_id(security_groups, "random_security_group_id", g["GroupId"]):
            ec2.create_security_group(GroupName=g["GroupName"], Description=g.get("Description") or "-", VpcId=g["VpcId"])
        tag(g["GroupId"], g.get("Tags"))
    for i in world.get("images") or []:
        ssm_seed.add_image(region, image_id=i["ImageId"], name=i.get("Name") or i["ImageId"],
                           arch=i.get("Architecture") or "x86_64", owner_id=i.get("OwnerId"),
                           owner_alias=i.get("ImageOwnerAlias"), creation_date=i.get("CreationDate"),
                           deprecation_time=i.get("DeprecationTime"), tags=i.get("Tags"), platform=i.get("Platform"))
    for p in world.get("ssmParameters") or []:
        ssm_seed.put_public_parameter(p["Name"], p["Value"], region)
    account._eks(kube_url)
    account._tables()
    account._queues()
    have = {r["RoleName"] for page in iam.get_paginator("list_roles").paginate() for r in page["Roles"]}
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    for r in world.get("iamRoles") or []:
        if r["RoleName"] not in have:
            doc = r.get("AssumeRolePolicyDocument")
            iam.create_role(RoleName=r["RoleName"], Path=r.get("Path") or "/",
                            AssumeRolePolicyDocument=json.dumps(doc) if isinstance(doc, dict) else (doc or trust))
    for p in world.get("instanceProfiles") or []:
        tags = [{"Key": k, "Value": v} for k, v in (p.get("Tags") or {}).items()]
        iam.create_instance_profile(InstanceProfileName=p["InstanceProfileName"], Path=p.get("Path") or "/",
                                    **({"Tags": tags} if tags else {}))
        for role in p.get("Roles") or []:
            iam.add_role_to_instance_profile(InstanceProfileName=p["InstanceProfileName"], RoleName=role)
    return account


def _seed_like_simulate(state: dict, docs: dict, kube_url: str) -> SimAccount:
    """An ec2.json from before the world was saved: seed as ``simulate`` seeds a new account, then point the saved
    state at the ids this moto gave (subnets, security groups, AMIs by name)."""
    nodeclasses = []
    for item in state.get("items", []):
        if (item.get("kind") or {}).get("S") == "EC2NodeClass":
            doc = {"apiVersion": item["apiVersion"]["S"], "kind": "EC2NodeClass",
                   "metadata": {"name": json.loads(item["metadata"]["S"])["name"]},
                   "spec": json.loads(item["spec"]["S"])}
            nodeclasses.extend(load_text(json.dumps(doc), "<state>").objects)
    account = SimAccount(state["cluster"], state["region"], state.get("k8sVersion") or "1.31",
                         state_table=state.get("stateTable") or SimAccount.state_table).create(nodeclasses, kube_url)
    new_ids = _ec2_ids(boto3.client("ec2", region_name=state["region"]))
    mapping = {old_id: new_ids[k] for k, old_id in (docs["ec2.json"].get("ids") or {}).items()
               if k in new_ids and old_id != new_ids[k]}
    text = json.dumps(state.get("items", []))
    for old_id, new_id in mapping.items():
        text = text.replace(old_id, new_id)
    state["items"] = json.loads(text)
    return account


def load_docs(directory: str | os.PathLike) -> dict[str, dict]:
    d = Path(directory)
    if not d.is_dir():
        raise StateDirError(f"--state {directory}: no such directory (write one with `simulate --save-state DIR`)")
    docs = {}
    for name in FILES:
        try:
            docs[name] = json.loads((d / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise StateDirError(f"--state {directory}: {name} missing: not a saved simulation "
                                f"(write one with `simulate --save-state DIR`)") from None
        except (OSError, ValueError) as e:
            raise StateDirError(f"--state {directory}: cannot read {name}: {e}") from None
    for name, problem in _shape_problems(docs):
        raise StateDirError(f"--state {directory}: {name}: {problem}: not a saved simulation "
                            f"(write one with `simulate --save-state DIR`)")
    return docs


_DDB_TYPES = {"S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL"}


def _type(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number",
            type(None): "null"}.get(type(value), type(value).__name__)


def _shape_problems(docs: dict[str, object]):
    """(file, what is wrong) for each saved file that is JSON of another shape than :func:`save_state` writes."""
    state, kube, world = docs.get("state.json"), docs.get("kube.json"), docs.get("ec2.json")
    if not isinstance(state, dict):
        yield "state.json", f"expected an object {{\"cluster\", \"region\", \"items\", ...}}, got {_type(state)}"
    else:
        for key in ("cluster", "region"):
            if not isinstance(state.get(key), str) or not state.get(key):
                yield "state.json", (f"{key!r} missing" if key not in state else f"{key!r} must be a non-empty string, "
                                                                                 f"got {_type(state[key])}")
        for key in ("items", "cacheItems"):
            value = state.get(key)
            if value is not None and (not isinstance(value, list) or not all(isinstance(i, dict) for i in value)):
                yield "state.json", f"{key!r} must be a list of DynamoDB items (objects), got {_type(value)}"
                continue
            for i, item in enumerate(value or ()):
                bad = next((k for k, v in item.items() if not (isinstance(v, dict) and len(v) == 1 and set(v) <= _DDB_TYPES)),
                           None)
                if bad is not None:
                    yield "state.json", (f"{key}[{i}].{bad} must be a DynamoDB-typed value such as {{\"S\": \"...\"}}, "
                                         f"got {json.dumps(item[bad])[:60]}")
                    break
        for key in ("k8sVersion", "stateTable", "cacheTable"):
            if state.get(key) is not None and not isinstance(state[key], str):
                yield "state.json", f"{key!r} must be a string, got {_type(state[key])}"
        if isinstance(state.get("k8sVersion"), str) and not re.match(r"^\d+\.\d+", state["k8sVersion"]):
            yield "state.json", f"'k8sVersion' must be a Kubernetes version such as 1.31, got {state['k8sVersion']!r}"
        if state.get("time") is not None and (isinstance(state["time"], bool) or not isinstance(state["time"], (int, float))):
            yield "state.json", f"'time' must be a number (epoch seconds), got {_type(state['time'])}"
        env = state.get("functionEnv")
        if env is not None and (not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values())):
            yield "state.json", "'functionEnv' must be an object of strings"
    if not isinstance(kube, dict):
        yield "kube.json", f"expected an object {{plural: [object, ...]}}, got {_type(kube)}"
    else:
        for plural, objs in kube.items():
            if not isinstance(objs, list):
                yield "kube.json", f"{plural!r} must be a list of objects, got {_type(objs)}"
                continue
            for i, obj in enumerate(objs):
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                    yield "kube.json", f"{plural}[{i}] must be an object with metadata.name"
                    break
    if not isinstance(world, dict):
        yield "ec2.json", f"expected an object {{\"instances\", \"vpcs\", \"subnets\", ...}}, got {_type(world)}"
    else:
        for key, value in world.items():
            if key == "ids":
                if not isinstance(value, dict):
                    yield "ec2.json", f"'ids' must be an object, got {_type(value)}"
            elif not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
                yield "ec2.json", f"{key!r} must be a list of objects, got {_type(value)}"


@contextlib.contextmanager
def serve_state(directory: str | os.PathLike):
    """Serve a saved simulation: yields ``{"cluster", "region", "kubeEndpoint"}`` while moto and the local API run."""
    from ..adapters.aws.clients import share_service_models
    from . import moto_speedups

    docs = load_docs(directory)
    state, kube, world = docs["state.json"], docs["kube.json"], docs["ec2.json"]
    saved_env = dict(os.environ)
    clock = VirtualClock(float(state.get("time") or 0) or None)
    server = None
    try:
        for var in list(os.environ):  # nothing of the shell may point elsewhere (as in the simulator)
            if var in ("AWS_PROFILE", "AWS_CONFIG_FILE") or var.startswith("AWS_ENDPOINT_URL") or (
                    var.startswith("KARPENTER_LAMBDA_") and var != "KARPENTER_LAMBDA_REPO"):
                os.environ.pop(var, None)
        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": state["region"],
                           # as in the simulator (sim/environment.py): moto's own public AMIs are not there, so no
                           # amiSelectorTerm can match one offline that matched nothing in the run
                           "MOTO_EC2_LOAD_DEFAULT_AMIS": "false"})
        share_service_models()
        moto_speedups.install()
        with mock_aws():
            server = KubeAPIServer(clock=clock, k8s_version=state.get("k8sVersion") or "1.31")
            url = server.start()
            try:
                account = _seed(server, url, state, kube, world, docs)
            except _SeedError as e:
                raise StateDirError(f"--state {directory}: {e}: not a saved simulation (write one with "
                                    f"`simulate --save-state DIR`)") from None
            os.environ.update(account.environment())
            os.environ.update(state.get("functionEnv") or {})   # the run's catalog settings: the same catalogs
            os.environ["KARPENTER_LAMBDA_KUBE_ENDPOINT"] = url
            runtime.set_clock(clock)
            environment.reset()
            yield {"cluster": state["cluster"], "region": state["region"], "kubeEndpoint": url}
    finally:
        if server is not None:
            server.stop()
        runtime.set_clock(None)
        environment.reset()
        os.environ.clear()
        os.environ.update(saved_env)


class _SeedError(Exception):
    """One saved entry that cannot be loaded: ``FILE: what``."""


def _seed(server, url: str, state: dict, kube: dict, world: dict, docs: dict) -> SimAccount:
    """The local Kubernetes API, moto's EC2/SSM/IAM world and the DynamoDB tables seeded from the saved files; an
    entry that cannot be loaded is a :class:`_SeedError` naming its file."""
    from botocore.exceptions import BotoCoreError, ClientError

    order = ["namespaces"] + [p for p in kube if p != "namespaces"]
    for plural in order:
        if plural not in RESOURCES:
            continue
        rt = RESOURCES[plural]
        for i, obj in enumerate(kube.get(plural, [])):
            ns = (obj.get("metadata") or {}).get("namespace")
            if plural == "namespaces" and server.store.get("namespaces", obj["metadata"]["name"]) is not None:
                continue
            try:
                server.store.create(plural, obj, ns)
            except (StoreError, KeyError, TypeError, AttributeError, ValueError) as e:   # refused, or malformed
                raise _SeedError(f"kube.json: {plural}[{i}] cannot be created: {e}") from None
            # keep the saved object as it was (uid, creationTimestamp, status): the commands read ages and phases
            with server.store.lock:
                server.store._objects[plural][server.store._key(rt, obj["metadata"]["name"], ns)] = obj
    try:
        if all(k in world for k in WORLD_KEYS):
            account = _restore_world(state, world, url)
        else:
            account = _seed_like_simulate(state, docs, url)
    except (KeyError, TypeError, AttributeError, ValueError, BotoCoreError, ClientError) as e:
        raise _SeedError(f"ec2.json: cannot be loaded ({type(e).__name__}: {e})") from None
    ddb = boto3.client("dynamodb", region_name=state["region"])
    for key, table in (("items", account.state_table), ("cacheItems", account.cache_table)):
        for i, item in enumerate(_items_in(state.get(key) or [])):
            try:
                ddb.put_item(TableName=table, Item=item)
            except (BotoCoreError, ClientError, TypeError, AttributeError) as e:
                raise _SeedError(f"state.json: {key}[{i}] is not a DynamoDB item ({type(e).__name__}: {e})") from None
    return account
