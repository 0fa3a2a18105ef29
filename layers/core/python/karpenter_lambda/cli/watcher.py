"""watcher manifest: the watcher's Kubernetes manifests with the image, queue, region and cluster filled in.

Reads watcher/manifests/*.yaml (the Namespace, ServiceAccount, RBAC and Deployment), sets the Deployment's
container image and its CLUSTER_NAME, POD_QUEUE_URL and AWS_REGION, and prints multi-document YAML for
`kubectl apply -f -`. Values come from flags, or from the stack's outputs (`cdk deploy --outputs-file FILE`, or
`aws cloudformation describe-stacks` JSON) with --stack-outputs FILE; a flag wins over the file.

    karpenter-lambda watcher manifest --stack-outputs outputs.json | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import yaml

from .. import resources
from ..api import roles

CONTAINER = "watcher"
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
SQS_URL_RE = re.compile(r"^https://sqs\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/[0-9]{12}/[A-Za-z0-9_.-]{1,80}$")
# stack output keys (infra/stack.py) -> the values they fill
OUTPUT_KEYS = {"image": "WatcherImageUri", "pod_queue_url": "PodQueueUrl", "region": "Region", "cluster": "ClusterName"}


class RenderError(ValueError):
    """A value is missing or wrong; the message names the flag (or output) that fixes it."""


def register(sub) -> None:
    p = sub.add_parser("watcher", help="the in-cluster watcher (manifest)", description=__doc__.split("\n\n")[0])
    wsub = p.add_subparsers(dest="watcher_command", metavar="SUBCOMMAND")
    wsub.required = True
    m = wsub.add_parser("manifest", help="print the watcher's Kubernetes manifests with the deployment's values",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("--stack-outputs", metavar="FILE",
                   help="the stack's outputs: `cdk deploy --outputs-file FILE` JSON, or `aws cloudformation "
                        "describe-stacks` JSON ('-' reads stdin)")
    m.add_argument("--image", help="the watcher image (output WatcherImageUri)")
    m.add_argument("--pod-queue-url", help="the pod queue's URL (output PodQueueUrl)")
    # own dests: the global --cluster/--region have defaults, which must not hide the stack outputs
    m.add_argument("--cluster", dest="watcher_cluster", metavar="NAME",
                   help="EKS cluster name (output ClusterName; else the global --cluster / KARPENTER_LAMBDA_CLUSTER, else "
                        "clusterName in ./cdk.json's context)")
    m.add_argument("--region", dest="watcher_region", metavar="REGION",
                   help="AWS region (output Region; else the pod queue URL's region, else the global --region)")
    m.add_argument("--event-queue-url", help="optional EVENT_QUEUE_URL (node and pod-bound events, docs/watcher.md)")
    m.add_argument("--manifests", metavar="DIR", default=None,
                   help="folder of the manifest templates (default: the repository's watcher/manifests, or the installed package's copy)")
    m.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    m.set_defaults(func=run_manifest)


def read_stack_outputs(text: str, cluster: str | None = None) -> dict[str, str]:
    """Output key -> value from `cdk deploy --outputs-file` JSON ({stack: {key: value}}; with several stacks the
    one of ``cluster``), `describe-stacks` JSON ({"Stacks": [{"Outputs": [...]}]}), its Outputs list, or a flat
    {key: value}."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise RenderError(f"--stack-outputs: not JSON ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("Stacks"), list):
        stacks = {s.get("StackName", str(i)): s.get("Outputs") or [] for i, s in enumerate(data["Stacks"]) if isinstance(s, dict)}
        data = _pick(stacks, cluster)
    if isinstance(data, list):
        try:
            return {str(o["OutputKey"]): str(o["OutputValue"]) for o in data}
        except (TypeError, KeyError):
            raise RenderError("--stack-outputs: a list must hold {OutputKey, OutputValue} items") from None
    if not isinstance(data, dict):
        raise RenderError("--stack-outputs: expected a JSON object")
    if data and all(isinstance(v, dict) for v in data.values()):   # cdk --outputs-file: one object per stack
        data = _pick(data, cluster)
        if isinstance(data, list):
            return read_stack_outputs(json.dumps(data))
    return {str(k): str(v) for k, v in data.items() if not isinstance(v, (dict, list))}


def _pick(stacks: dict, cluster: str | None):
    ours = {k: v for k, v in stacks.items() if k.startswith(roles.STACK_NAME_PREFIX)} or stacks
    if cluster and roles.stack_name(cluster) in ours:
        return ours[roles.stack_name(cluster)]
    if len(ours) == 1:
        return next(iter(ours.values()))
    names = ", ".join(sorted(ours)) or "none"
    raise RenderError(f"--stack-outputs: {len(ours)} stacks ({names}); pass --cluster NAME to choose "
                      f"{roles.STACK_NAME_PREFIX}<NAME>")


def load_templates(folder: Path) -> list[dict]:
    files = sorted(f for f in Path(folder).glob("*.y*ml")) if Path(folder).is_dir() else []
    if not files:
        raise RenderError(f"--manifests: no *.yaml in {folder} (the repository's watcher/manifests)")
    docs = []
    for f in files:
        try:
            docs.extend(d for d in yaml.safe_load_all(f.read_text(encoding="utf-8")) if d)
        except yaml.YAMLError as e:
            raise RenderError(f"--manifests: {f}: not YAML ({e})") from None
    return docs


def render(docs: list[dict], *, image: str, pod_queue_url: str, region: str, cluster: str,
           event_queue_url: str | None = None, namespace: str | None = None, service_account: str | None = None) -> list[dict]:
    """The documents with the values set (copies); checks each value and that the namespace/service account are the
    ones the stack's Pod Identity association binds (``namespace``/``service_account``: the stack's outputs)."""
    _check(image=image, pod_queue_url=pod_queue_url, region=region, cluster=cluster, event_queue_url=event_queue_url)
    want_ns, want_sa = namespace or roles.WATCHER_NAMESPACE, service_account or roles.WATCHER_SERVICE_ACCOUNT
    docs = json.loads(json.dumps(docs))
    deployments = [d for d in docs if d.get("kind") == "Deployment"]
    if len(deployments) != 1:
        raise RenderError(f"--manifests: expected one Deployment, found {len(deployments)}")
    pod = deployments[0]["spec"]["template"]["spec"]
    sa_docs = [d for d in docs if d.get("kind") == "ServiceAccount"]
    where = {(d["metadata"].get("namespace"), d["metadata"]["name"]) for d in sa_docs}
    used = (deployments[0]["metadata"].get("namespace"), pod.get("serviceAccountName"))
    if used != (want_ns, want_sa) or used not in where:
        raise RenderError(f"the watcher runs as {used[0]}/{used[1]} (ServiceAccounts in the manifests: "
                          f"{sorted(f'{n}/{s}' for n, s in where)}), but the stack's Pod Identity association "
                          f"binds {want_ns}/{want_sa}: fix the manifests")
    containers = [c for c in pod.get("containers", []) if c.get("name") == CONTAINER]
    if not containers:
        raise RenderError(f"--manifests: the Deployment has no container named {CONTAINER!r}")
    c = containers[0]
    c["image"] = image
    values = {"CLUSTER_NAME": cluster, "POD_QUEUE_URL": pod_queue_url, "AWS_REGION": region}
    if event_queue_url:
        values["EVENT_QUEUE_URL"] = event_queue_url
    env = c.setdefault("env", [])
    for name, value in values.items():
        entry = next((e for e in env if e.get("name") == name), None)
        if entry is None:
            env.append({"name": name, "value": value})
        else:
            entry.pop("valueFrom", None)
            entry["value"] = value
    return docs


def _check(*, image, pod_queue_url, region, cluster, event_queue_url) -> None:
    if not roles.IMAGE_RE.match(image) or "ACCOUNT_ID" in image:
        raise RenderError(f"--image: {image!r} is not a container image reference (e.g. "
                          "123456789012.dkr.ecr.us-east-1.amazonaws.com/karpenter-lambda-watcher:1.0)")
    if not REGION_RE.match(region):
        raise RenderError(f"--region: {region!r} is not an AWS region like us-east-1")
    if not roles.CLUSTER_NAME_RE.match(cluster):
        raise RenderError(f"--cluster: {cluster!r} is not an EKS cluster name (1-100 letters, digits, '-', '_')")
    for flag, url in (("--pod-queue-url", pod_queue_url), ("--event-queue-url", event_queue_url)):
        if url is None:
            continue
        m = SQS_URL_RE.match(url)
        if not m:
            raise RenderError(f"{flag}: {url!r} is not an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
        if m.group("region") != region:
            raise RenderError(f"{flag}: the queue is in {m.group('region')}, but the region is {region} (--region)")


def known_cluster(args, cwd: Path | None = None) -> str | None:
    """The deployment's cluster when the user told it: the global ``--cluster`` (or $KARPENTER_LAMBDA_CLUSTER), else
    ``clusterName`` in ./cdk.json's context (what ``cdk deploy`` uses); None when only the placeholder default is
    known. Shared with ``validate`` (the node-role check needs the stack's cluster)."""
    if getattr(args, "cluster", "default") != "default" or "KARPENTER_LAMBDA_CLUSTER" in os.environ:
        return args.cluster
    try:
        context = json.loads(((cwd or Path.cwd()) / "cdk.json").read_text(encoding="utf-8")).get("context") or {}
    except (OSError, ValueError, AttributeError):
        return None
    name = context.get("clusterName") if isinstance(context, dict) else None
    return str(name).strip() if isinstance(name, str) and name.strip() else None


def resolve(args) -> dict:
    """The values from the flags, else --stack-outputs, else (cluster) the global option or cdk.json, (region) the
    queue URL's region or the global option."""
    outputs: dict[str, str] = {}
    if args.stack_outputs:
        try:
            text = sys.stdin.read() if args.stack_outputs == "-" else Path(args.stack_outputs).read_text(encoding="utf-8")
        except OSError as e:
            raise RenderError(f"--stack-outputs: cannot read {args.stack_outputs}: {e.strerror or e}") from None
        outputs = read_stack_outputs(text, args.watcher_cluster)
    values = {k: getattr(args, k if k not in ("cluster", "region") else f"watcher_{k}") or outputs.get(key)
              for k, key in OUTPUT_KEYS.items()}
    values["cluster"] = values["cluster"] or known_cluster(args)
    if not values["region"] and values["pod_queue_url"] and SQS_URL_RE.match(values["pod_queue_url"]):
        values["region"] = SQS_URL_RE.match(values["pod_queue_url"]).group("region")
    values["region"] = values["region"] or args.region
    missing = [f"--{k.replace('_', '-')} (output {OUTPUT_KEYS[k]})" for k, v in values.items() if not v]
    if missing:
        raise RenderError(f"missing {', '.join(missing)}: pass the flag(s) or --stack-outputs FILE "
                          "(`cdk deploy --outputs-file FILE`)")
    values["namespace"] = outputs.get("WatcherNamespace")
    values["service_account"] = outputs.get("WatcherServiceAccount")
    values["event_queue_url"] = args.event_queue_url
    return values


def run_manifest(args) -> int:
    try:
        values = resolve(args)
        docs = render(load_templates(Path(args.manifests) if args.manifests else resources.watcher_manifests_dir()), **values)
    except RenderError as e:
        sys.stderr.write(f"watcher manifest: {e}\n")
        return 2
    text = (f"# karpenter-lambda watcher for EKS cluster {values['cluster']} ({values['region']}), rendered by "
            "`karpenter-lambda watcher manifest`\n" + yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
