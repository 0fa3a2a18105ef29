"""Save a finished simulation to a directory, and serve it again so the read-only commands can look at it offline.

``simulate --save-state DIR`` calls :func:`save_state` at the end of the run (inside moto, while the local Kubernetes
API still holds the cluster) and writes, as JSON:

- ``state.json``: ``{"cluster", "region", "k8sVersion", "time", "stateTable", "items"}``: every item of the DynamoDB
  state table (NodePools, EC2NodeClasses, NodeClaims, ... as adapters/store/state.py stores them), DynamoDB-typed;
- ``kube.json``: ``{plural: [object, ...]}``: the objects of the local Kubernetes API (nodes, pods, daemonsets, PDBs,
  workloads, ...);
- ``ec2.json``: ``{"instances": [...]}``: the EC2 instances (DescribeInstances) at the end of the run.

:func:`serve_state` starts in-process moto and a local Kubernetes API seeded from DIR, points the environment at them
(as the simulator does: ``SimAccount.environment()`` plus ``KARPENTER_LAMBDA_KUBE_ENDPOINT``), sets the clock to the
simulation's end, and undoes all of it on exit.  The commands then run unchanged (``--state DIR``).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import boto3
from moto import mock_aws

from ..api.manifests import load_text
from ..controllers import environment, runtime
from .aws import SimAccount
from .clock import VirtualClock
from .kubeapi import RESOURCES, KubeAPIServer

FILES = ("state.json", "kube.json", "ec2.json")


class StateDirError(Exception):
    """DIR is not a saved simulation (missing or unreadable files)."""


def save_state(sim, directory: str | os.PathLike) -> list[Path]:
    """Write the simulation's DynamoDB state, Kubernetes objects and EC2 instances to ``directory`` (created)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    account = sim.account
    ddb = boto3.client("dynamodb", region_name=sim.region)
    items: list[dict] = []
    kwargs: dict = {"TableName": account.state_table}
    while True:
        page = ddb.scan(**kwargs)
        items.extend(page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    kube = {plural: sim.server.store.list(plural) for plural in RESOURCES}
    kube = {k: v for k, v in kube.items() if v and k != "events"}
    ec2 = boto3.client("ec2", region_name=sim.region)
    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    ec2_ids = _ec2_ids(ec2)
    docs = {
        "state.json": {"cluster": sim.cluster, "region": sim.region, "k8sVersion": sim.k8s_version,
                       "time": sim.clock.now(), "stateTable": account.state_table, "items": items},
        "kube.json": kube,
        "ec2.json": {"instances": instances, "ids": ec2_ids},
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
    return docs


@contextlib.contextmanager
def serve_state(directory: str | os.PathLike):
    """Serve a saved simulation: yields ``{"cluster", "region", "kubeEndpoint"}`` while moto and the local API run."""
    docs = load_docs(directory)
    state, kube = docs["state.json"], docs["kube.json"]
    saved_env = dict(os.environ)
    clock = VirtualClock(float(state.get("time") or 0) or None)
    server = None
    try:
        for var in list(os.environ):  # nothing of the shell may point elsewhere (as in the simulator)
            if var in ("AWS_PROFILE", "AWS_CONFIG_FILE") or var.startswith("AWS_ENDPOINT_URL") or (
                    var.startswith("KARPENTER_LAMBDA_") and var != "KARPENTER_LAMBDA_REPO"):
                os.environ.pop(var, None)
        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": state["region"]})
        with mock_aws():
            nodeclasses = []
            for item in state.get("items", []):
                if (item.get("kind") or {}).get("S") == "EC2NodeClass":
                    doc = {"apiVersion": item["apiVersion"]["S"], "kind": "EC2NodeClass",
                           "metadata": {"name": json.loads(item["metadata"]["S"])["name"]},
                           "spec": json.loads(item["spec"]["S"])}
                    nodeclasses.extend(load_text(json.dumps(doc), "<state>").objects)
            server = KubeAPIServer(clock=clock, k8s_version=state.get("k8sVersion") or "1.31")
            url = server.start()
            order = ["namespaces"] + [p for p in kube if p != "namespaces"]
            for plural in order:
                if plural not in RESOURCES:
                    continue
                rt = RESOURCES[plural]
                for obj in kube.get(plural, []):
                    ns = (obj.get("metadata") or {}).get("namespace")
                    if plural == "namespaces" and server.store.get("namespaces", obj["metadata"]["name"]) is not None:
                        continue
                    server.store.create(plural, obj, ns)
                    # keep the saved object as it was (uid, creationTimestamp, status): the commands read ages and phases
                    with server.store.lock:
                        server.store._objects[plural][server.store._key(rt, obj["metadata"]["name"], ns)] = obj
            account = SimAccount(state["cluster"], state["region"], state.get("k8sVersion") or "1.31",
                                 state_table=state.get("stateTable") or SimAccount.state_table).create(nodeclasses, url)
            # the saved ids (subnets, security groups, AMIs) -> the ones this moto gave: the state refers to them
            new_ids = _ec2_ids(boto3.client("ec2", region_name=state["region"]))
            mapping = {old_id: new_ids[k] for k, old_id in (docs["ec2.json"].get("ids") or {}).items()
                       if k in new_ids and old_id != new_ids[k]}
            text = json.dumps(state.get("items", []))
            for old_id, new_id in mapping.items():
                text = text.replace(old_id, new_id)
            state["items"] = json.loads(text)
            ddb = boto3.client("dynamodb", region_name=state["region"])
            for item in state.get("items", []):
                ddb.put_item(TableName=account.state_table, Item=item)
            os.environ.update(account.environment())
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
