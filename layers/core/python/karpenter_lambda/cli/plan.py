"""`karpenter-lambda plan -f FILE...`: one provisioning round, dry run, over Kubernetes manifests.

Offline by default: instance types and offerings are moto's bundled EC2 data for
the region, read straight from its files by the catalog adapter the provisioner
uses (source ``moto-bundled``: the same dicts as through boto3 + moto, nothing
leaves the machine); on-demand prices from the bundled table, spot prices from
the deterministic estimate (docs/catalog.md), marked as estimates.
``--live`` asks real AWS (credentials from the environment) and
``--endpoint-url`` any AWS-compatible endpoint.

Capacity reservations: ``--capacity-reservations FILE`` (a saved DescribeCapacityReservations answer) or, with
``--live``/``--endpoint-url``, EC2 itself: each EC2NodeClass gets the reservations its
``capacityReservationSelectorTerms`` select, as ``reserved`` offerings; a reservation takes at most as many
NodeClaims as it has room for, the rest launch as the launch path would fall back (spot, on-demand).

Allocatable: as the functions compute it, with the deployment's VM memory overhead and reserved ENIs
(``--vm-memory-overhead-percent`` / ``$KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT``, default 0.075;
``--reserved-enis`` / ``$KARPENTER_LAMBDA_RESERVED_ENIS``, default 0; a flag wins over its variable).

Zones: the zones the simulator creates subnets in (``catalog.zones.default_zones``: ``<region>a..c``,
those with offerings), or ``--zones us-east-1a,us-east-1b``; printed with the plan.

``--json`` prints exactly::

    {"nodeClaims": [{"name", "nodePool", "instanceTypes": [...], "instanceType", "zone",
                     "capacityType", "pricePerHour", "priceEstimated", "pods": ["ns/name", ...],
                     "capacityReservationId": "cr-..." or null}],
     "unschedulable": [{"pod": "ns/name", "reason": "..."}],
     "costPerHour": N, "costEstimated": bool, "zones": ["us-east-1a", ...]}

Extra keys may be added (``existing``, ``reasons``, ``gated``: [{"pod", "gates"}], pods held back by their
scheduling gates, which Karpenter does not provision for, ``priceOverlay``/``basePricePerHour`` where a NodeOverlay of
the input set the price); none is ever renamed.

NodeOverlays (karpenter.sh/v1alpha1) in the input apply to the catalog as the controllers apply the stored ones.

NodeClaims (karpenter.sh/v1) in the input are manual NodeClaims, launched as they are (``cli/plan_nodeclaims.py``):
listed first with what each would launch as, and offered to the pending pods as in-flight capacity; ``--json`` adds
``givenNodeClaims`` (``[{"name", "nodePool", "launchable", "instanceTypes", "instanceType", "zone", "capacityType",
"pricePerHour", "priceEstimated", "pods", "reason"}]``; ``costPerHour`` stays the new NodeClaims' cost).  With
NodeClaims, a NodePool is not required.

Default topology spread (Karpenter v1.15's ``--scheduler-config``): ``--scheduler-config FILE`` (YAML or JSON
``podTopologySpread: {defaultConstraints: [...]}``, the defaults the cluster's kube-scheduler is configured with;
default ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG``, the document itself, as the functions read it) gives every pending pod
without ``topologySpreadConstraints`` of its own the defaults, with the selector kube-scheduler deduces from the
Services (v1 ``Service`` manifests among the files) selecting it and its ReplicaSet / StatefulSet /
ReplicationController (a Deployment's ReplicaSet as its controller would create it, ``api/workloads.py``;
``scheduling/default_spread.py``).  ``--json`` adds ``defaultSpreadConstraints`` (the defaults, ``[]`` when none) and
``defaultSpreadPods`` (the pods given them).

Exit status: 0 every pending pod is placed; 3 some pods stay unschedulable (listed first, and in ``--json``);
1 the input has errors; 2 usage or environment (bad flag, region without data).
"""

from __future__ import annotations

import json
import sys
import time

from karpenter_lambda.api.errors import ValidationIssue
from karpenter_lambda.api.kube import pod_key, scheduling_gates
from karpenter_lambda.api.manifests import CAPACITY_BUFFER_HINT, load_files
from karpenter_lambda.api.objects import AWS_GROUP, EC2NodeClass, KubeObject, NodeOverlay, NodePool
from karpenter_lambda.api.workloads import add_claim_volumes, claim_templates, expand, stateful_claims
from karpenter_lambda.cli.validate import (InputError, empty_inputs, format_issue, input_warnings, kubernetes_version,
                                           print_warnings, read_stdin)
from karpenter_lambda.cli.validate import SchedulerConfigFileError, read_scheduler_config_file  # noqa: F401 (simulate)

from .plan_nodeclaims import add_placements, given_nodeclaims, nodeclasses_needed, plan_given
from .plan_nodeclaims import render as render_given
from .table import render_table


def register(sub) -> None:
    p = sub.add_parser("plan", help="one provisioning round, dry run, over manifests (offline by default)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("-f", "--filename", dest="files", action="append", default=[], metavar="FILE",
                   help="manifest file or directory, or - for stdin (repeatable): NodePool, EC2NodeClass, NodeClaim, Pod, Deployment, ReplicaSet, "
                        "StatefulSet, Job, DaemonSet, PersistentVolumeClaim, PersistentVolume, StorageClass")
    p.add_argument("more_files", nargs="*", metavar="FILE",
                   help="more manifest files or directories, as for validate and simulate (added after the -f ones)")
    p.add_argument("--region", dest="plan_region", metavar="REGION", default=None,
                   help="AWS region of the instance data (same as the global --region; default us-east-1)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--live", action="store_true", help="read instance types and prices from real AWS instead of moto's bundled data")
    p.add_argument("--zones", dest="plan_zones", metavar="ZONE[,ZONE...]", default=None,
                   help="availability zones to plan in (default: the simulator's, <region>a,b,c)")
    p.add_argument("--kubernetes-version", metavar="MAJOR.MINOR", default=None,
                   help="check the manifests against this Kubernetes version's API (default: "
                        "$KARPENTER_LAMBDA_KUBERNETES_VERSION or the simulated cluster's), as validate does")
    p.add_argument("--capacity-reservations", dest="plan_reservations", metavar="FILE", default=None,
                   help="a saved DescribeCapacityReservations answer (JSON): the reservations each EC2NodeClass's "
                        "capacityReservationSelectorTerms select from it (default: asked of EC2 with --live or "
                        "--endpoint-url; none offline)")
    add_catalog_flags(p)
    add_scheduler_config_flag(p)
    p.set_defaults(func=run)


def add_scheduler_config_flag(p) -> None:
    """``--scheduler-config FILE`` (plan and simulate): Karpenter's ``--scheduler-config``, the cluster's kube-scheduler
    default topology spread constraints; default ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG`` (the document itself)."""
    p.add_argument("--scheduler-config", dest="scheduler_config", metavar="FILE", default=None,
                   help="YAML or JSON {podTopologySpread: {defaultConstraints: [...]}}: the default topology spread "
                        "constraints the cluster's kube-scheduler applies to pods without their own (Karpenter's "
                        "--scheduler-config; default: the document in $KARPENTER_LAMBDA_SCHEDULER_CONFIG)")


def scheduler_config_of(args):
    """(the SchedulerConfig or None, where it came from: the file, the variable or None) for ``args``: the
    ``--scheduler-config`` file, else ``$KARPENTER_LAMBDA_SCHEDULER_CONFIG``.  Raises SchedulerConfigFileError for a
    file that cannot be read, SchedulerConfigError (a ValueError naming the file or variable and the field) for a bad
    document."""
    import os

    from karpenter_lambda.api.scheduler_config import SCHEDULER_CONFIG_ENV, parse_scheduler_config

    path = getattr(args, "scheduler_config", None)
    if path is None:
        raw = os.environ.get(SCHEDULER_CONFIG_ENV)
        config = parse_scheduler_config(raw, f"environment variable {SCHEDULER_CONFIG_ENV}")
        return config, (f"${SCHEDULER_CONFIG_ENV}" if config is not None else None)
    text = read_scheduler_config_file(path)
    from karpenter_lambda.api.scheduler_config import SchedulerConfig

    # an empty file is a configuration without defaults (as an empty document), not "not set"
    return parse_scheduler_config(text, path) or SchedulerConfig(()), path


def describe_constraint(c: dict) -> str:
    """One default constraint in a few words: ``topology.kubernetes.io/zone maxSkew 1 DoNotSchedule``."""
    extra = "".join(f" {k} {c[k]}" for k in ("minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy") if k in c)
    return f"{c.get('topologyKey')} maxSkew {c.get('maxSkew')} {c.get('whenUnsatisfiable')}{extra}"


def add_catalog_flags(p) -> None:
    """``--vm-memory-overhead-percent`` and ``--reserved-enis`` (plan and simulate): Karpenter's two catalog settings,
    which win over ``$KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT`` / ``$KARPENTER_LAMBDA_RESERVED_ENIS``
    (``controllers/runtime.catalog_settings`` checks both)."""
    p.add_argument("--vm-memory-overhead-percent", dest="vm_memory_overhead_percent", metavar="FRACTION", default=None,
                   help="memory the hypervisor takes, as a fraction of the instance memory (Karpenter's "
                        "--vm-memory-overhead-percent; default $KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT or 0.075)")
    p.add_argument("--reserved-enis", dest="reserved_enis", metavar="N", default=None,
                   help="network interfaces left out of the max-pods count (Karpenter's --reserved-enis; default "
                        "$KARPENTER_LAMBDA_RESERVED_ENIS or 0)")


def catalog_settings_of(args) -> dict:
    """The catalog settings for ``args`` (its flags, else the environment); ValueError naming the flag or variable."""
    from karpenter_lambda.controllers.runtime import catalog_settings

    return catalog_settings(vm_memory_overhead_percent=getattr(args, "vm_memory_overhead_percent", None),
                            reserved_enis=getattr(args, "reserved_enis", None))


# the storage objects plan reads from the files: a pod's claims, their volumes and classes (volume topology)
STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass")
#: plan's exit status when pods stay unschedulable (0: every pod placed; 1: input errors; 2: usage or environment)
EXIT_UNSCHEDULABLE = 3


class PlanError(Exception):
    pass


def _admit(pods: list[dict], docs: list[dict], daemonsets: list[dict] = ()) -> tuple[list[dict], list[dict]]:
    """The pods as the API server's admission leaves them (``api/admission.py``): the LimitRanger (containers' default
    requests and limits from the LimitRanges of their namespace), the Priority admission and the RuntimeClass
    admission (the class's overhead, node selector and tolerations).  With no RuntimeClass in the files a pod naming
    one is planned as it is (validate's warning says its class is not counted); a pod the chain refuses is a
    PlanError.  And the DaemonSets as their overhead is counted (``scheduling.nodeclaim.counted_daemonsets``): the
    pod of a DaemonSet among the files' pods when one is there, else its template admitted by the same chain in the
    DaemonSet's namespace (a RuntimeClass's overhead, a LimitRange's default requests); a template the chain refuses
    is a PlanError too."""
    from karpenter_lambda.api.admission import Admission
    from karpenter_lambda.scheduling.nodeclaim import counted_daemonsets

    chain = Admission.of(docs)
    out, refused = [], {}
    for pod in pods:
        admitted, problem = chain.admit(pod)
        if problem:
            owner = ((pod["metadata"].get("ownerReferences") or [{}])[0]).get("name") or pod["metadata"]["name"]
            refused.setdefault(f"{pod['metadata'].get('namespace') or 'default'}/{owner}", problem)
        out.append(admitted)
    ds_refused: dict[str, str] = {}
    counted = counted_daemonsets(daemonsets, out, chain, ds_refused)
    for where, problem in ds_refused.items():
        refused.setdefault(f"{where} (DaemonSet)", problem)
    if refused:
        raise PlanError("the API server would refuse these pods:\n" + "\n".join(
            f"pods of {where}: {problem}" for where, problem in sorted(refused.items())))
    return out, counted


class PlanEnvironmentError(PlanError):
    """The environment cannot answer (e.g. no offline instance data for the region): exit 2."""


def build_plan(files: list[str], region: str, endpoint_url: str | None = None, live: bool = False, progress=None,
               zones: list[str] | None = None, reservations_file: str | None = None,
               kubernetes_version: str | None = None, catalog_settings: dict | None = None, scheduler_config=None,
               stdin: str | None = None):
    """Load, expand, build the catalog and solve; returns (SchedulingResult, context dict). Raises PlanError.

    ``files``: files and directories, and ``-`` for ``stdin`` (the text read from standard input), loaded together
    as ``validate`` loads them; a file or directory that gives nothing is an error, as in ``validate``.

    ``scheduler_config``: an ``api.scheduler_config.SchedulerConfig`` (or None): its default topology spread
    constraints go to the pending pods without their own (``scheduling/default_spread.py``), their selectors deduced
    from the files' Services and the pods' controllers; the context's ``defaultSpreadPods`` names the pods given them.

    ``catalog_settings``: ``{"vm_memory_overhead_percent", "reserved_enis"}`` (``runtime.catalog_settings``); None:
    the environment's, as the functions read them (a bad value is a PlanEnvironmentError).

    ``zones``: the availability zones to plan in; None = the simulator's (``default_zones(region)``, those with
    offerings).  A given zone with no offering at all is a PlanEnvironmentError.  The context's ``zones`` lists
    the zones assumed."""
    from karpenter_lambda.catalog.zones import default_zones

    from karpenter_lambda.api.snapshot import ClusterSnapshot
    from karpenter_lambda.scheduling import solve
    from karpenter_lambda.scheduling.inputs import scheduling_input

    loaded = load_files(files, allow_other_kinds=True, kubernetes_version=kubernetes_version, stdin=stdin)
    loaded.issues.extend(empty_inputs(files, loaded))   # an empty file or directory: validate's words
    loaded.warnings.extend(input_warnings(loaded))   # what is valid but cannot do what it says
    print_warnings(loaded)  # v1beta1 objects converted to v1, and those: one line each on stderr
    if loaded.issues:   # what validate refuses, in its words (with line numbers)
        raise PlanError("\n".join(format_issue(i) for i in loaded.issues))
    nodepools = [o for o in loaded.objects if isinstance(o, NodePool)]
    nodeclasses = {o.name: o for o in loaded.objects if isinstance(o, EC2NodeClass)}
    given = given_nodeclaims(loaded.objects)   # manual NodeClaims: launched as they are (cli/plan_nodeclaims.py)
    if not nodepools and not given:
        raise PlanError("no NodePool in the given files: add a karpenter.sh/v1 NodePool (see examples/default.yaml)")
    pods: list[dict] = []
    daemonsets: list[dict] = []
    storage: dict[str, list[dict]] = {kind: [] for kind in STORAGE_KINDS}
    namespaces: list[dict] = []   # their labels: what a pod (anti-)affinity term's namespaceSelector selects
    default_spread = tuple(getattr(scheduler_config, "default_constraints", None) or ())
    services: list[dict] = []     # what a default spread selector is deduced from (read only with default constraints)
    controllers: list[dict] = []  # the pods' ReplicaSets / StatefulSets (the expansion's), ReplicationControllers
    issues, ignored = [], []
    for i, obj in enumerate(loaded.objects):
        if type(obj) is not KubeObject:
            continue
        if default_spread and obj.doc.get("apiVersion") == "v1" and obj.doc.get("kind") in ("Service", "ReplicationController"):
            (services if obj.doc["kind"] == "Service" else controllers).append(_with_namespace(obj.doc))
            continue
        if obj.doc.get("kind") in STORAGE_KINDS:   # what the pods' volumes ask of their nodes (scheduling/volumes.py)
            storage[obj.doc["kind"]].append(obj.doc)
            continue
        if obj.doc.get("kind") == "Namespace" and obj.doc.get("apiVersion") == "v1":
            namespaces.append(obj.doc)
            continue
        file, index = loaded.origins[i] if i < len(loaded.origins) else ("<manifests>", i)
        w = expand(obj.doc, file, index)
        ignored.extend(w.ignored)
        pods.extend(w.pods)
        controllers.extend(w.controllers)
        daemonsets.extend(w.daemonsets)
        issues.extend(ValidationIssue(x.file, x.doc_index, x.kind, x.name, x.path, x.message,
                                      x.line or loaded.line_of(i, x.path)) for x in w.issues)
    if issues:   # in validate's words, naming the file, the document and the line
        raise PlanError("\n".join(format_issue(x) for x in issues))
    # read below (the admission), or meaningless in one provisioning round (a budget for evictions)
    read_later = ("RuntimeClass", "LimitRange", "PodDisruptionBudget")
    unread = [x for x in ignored if x.split("/", 1)[0] not in read_later]
    if unread:   # a Service, a ConfigMap... but also a ResourceQuota or a PriorityClass: say so rather than nothing
        shown = ", ".join(unread[:8]) + (f", ... ({len(unread)} in all)" if len(unread) > 8 else "")
        sys.stderr.write(f"plan: note: not read (plan builds pods from workloads, RuntimeClasses and LimitRanges "
                         f"only): {shown}\n")
        if any(x.startswith("CapacityBuffer/") for x in unread):
            sys.stderr.write(f"plan: note: {CAPACITY_BUFFER_HINT}\n")
    pods, daemonsets = _admit(pods, [o.doc for o in loaded.objects if type(o) is KubeObject], daemonsets)
    _stateful_claims(pods, [o.doc for o in loaded.objects if type(o) is KubeObject], storage["PersistentVolumeClaim"])
    waiting = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
    # pods with scheduling gates are neither scheduled nor provisioned for until the gates go (Kubernetes, Karpenter)
    gated = [{"pod": pod_key(p), "gates": scheduling_gates(p)} for p in waiting if scheduling_gates(p)]
    pending = [p for p in waiting if not scheduling_gates(p)]

    problems = []
    for np in nodepools:
        ref = np.node_class_ref
        group = str(ref.get("group", "")).split("/", 1)[0]   # validation lets "karpenter.k8s.aws/v1" through
        if ref.get("kind") != "EC2NodeClass" or group != AWS_GROUP:
            problems.append(f"NodePool {np.name}: nodeClassRef {ref.get('group')}/{ref.get('kind')} is not an EC2NodeClass (karpenter.k8s.aws); plan only knows EC2")
        elif ref.get("name") not in nodeclasses:
            problems.append(f"NodePool {np.name}: nodeClassRef EC2NodeClass {ref.get('name')!r} is not in the given files; add it with -f")
    if problems:
        raise PlanError("\n".join(problems))

    from karpenter_lambda.controllers.runtime import min_values_policy as read_min_values_policy

    try:   # the deployed controller's --min-values-policy, $KARPENTER_LAMBDA_MIN_VALUES_POLICY
        policy = read_min_values_policy()
    except ValueError as e:
        raise PlanEnvironmentError(str(e)) from None
    if catalog_settings is None:
        from karpenter_lambda.controllers.runtime import catalog_settings as read_catalog_settings

        try:
            catalog_settings = read_catalog_settings()
        except ValueError as e:
            raise PlanEnvironmentError(str(e)) from None
    from karpenter_lambda.adapters.aws.ec2_catalog import (SOURCE_EC2, SOURCE_MOTO_BUNDLED, bundled_ec2_data, load_catalog,
                                                           price_book_for)

    offline = not live and not endpoint_url
    t0 = time.monotonic()
    if offline:  # moto's data files, no mock_aws, no boto3 client
        clients, catalog_source = None, SOURCE_MOTO_BUNDLED
    else:
        import boto3

        clients, catalog_source = boto3.session.Session(region_name=region), SOURCE_EC2
    if progress:
        from karpenter_lambda.catalog.allocatable import DEFAULT_VM_MEMORY_OVERHEAD_PERCENT

        vm, enis = catalog_settings["vm_memory_overhead_percent"], catalog_settings["reserved_enis"]
        changed = ", ".join(([f"VM memory overhead {vm:g}"] if vm != DEFAULT_VM_MEMORY_OVERHEAD_PERCENT else [])
                            + ([f"{enis} reserved ENI{'' if enis == 1 else 's'}"] if enis else []))
        progress(f"loading instance types for {region} ({'live' if live else endpoint_url or 'offline: moto bundled data'})"
                 f"{' with ' + changed if changed else ''} ...")
    catalogs: dict[str, list] = {}
    explicit_zones = zones is not None
    wanted_zones = list(zones) if explicit_zones else default_zones(region)
    # the same scheduler input path as the provisioner and the sweeps: a snapshot (no cluster: no nodes)
    snap = ClusterSnapshot(now=time.time(), nodepools={np.name: np for np in nodepools}, nodeclasses=dict(nodeclasses),
                           pods=pods, daemonsets=daemonsets, pvcs=storage["PersistentVolumeClaim"],
                           pvs=storage["PersistentVolume"], storageclasses=storage["StorageClass"],
                           namespaces=namespaces,   # a pod's namespace with no Namespace in the files: no labels
                           default_spread=default_spread, services=services, workload_controllers=controllers)
    reservations = _reservations(nodeclasses, reservations_file, None if offline else clients, region, endpoint_url)
    book = None   # one price book for the region, whatever the number of EC2NodeClasses (and one fallback warning)
    for np_or_class in list(nodepools) + nodeclasses_needed(given, nodeclasses):
        np = np_or_class if isinstance(np_or_class, NodePool) else None
        nc = nodeclasses[np.node_class_ref["name"]] if np is not None else np_or_class
        if nc.name not in catalogs:
            try:
                if book is None:
                    if catalog_source == SOURCE_MOTO_BUNDLED:
                        bundled_ec2_data(region)   # a region moto has no data for: its KeyError, before any price
                    book = price_book_for(clients, region, endpoint_url=endpoint_url, source=catalog_source)
                catalogs[nc.name] = load_catalog(clients, region, nodeclass=nc, endpoint_url=endpoint_url, source=catalog_source,
                                                 zones=wanted_zones, estimated_available=True,  # a dry run: estimates shown, marked
                                                 reservations=reservations.get(nc.name, ()), prices=book,
                                                 **catalog_settings)
            except KeyError as e:  # moto has no data for that region
                raise PlanError(f"--region {region}: no instance data for this region offline ({e})") from None
        if np is not None:
            snap.instance_types[np.name] = catalogs[nc.name]
    overlay_conflicts = _apply_overlays(snap, nodepools, [o for o in loaded.objects if isinstance(o, NodeOverlay)])
    offered = {o.zone for cat in catalogs.values() for it in cat for o in it.offerings}
    if explicit_zones and catalogs:
        missing = [z for z in wanted_zones if z not in offered]
        if missing:
            raise PlanEnvironmentError(f"--zones: no instance type is offered in {', '.join(missing)} "
                                       f"({'live' if live else endpoint_url or 'offline data'}, region {region})")
    used_zones = [z for z in wanted_zones if z in offered]
    if offline and not any(any(o.available for o in it.offerings) for cat in catalogs.values() for it in cat):
        raise PlanEnvironmentError(f"--region {region}: moto's bundled data offers no instance type there (offline); "
                                   f"use a region with data (e.g. us-east-1, us-west-2, eu-west-1) or --live")
    t1 = time.monotonic()
    if progress:
        progress(f"scheduling {len(pending)} pods over {len(nodepools)} NodePools ...")
    given_entries = plan_given(given, nodeclasses, catalogs, snap)   # in-flight capacity for the pending pods
    own = {pod_key(p) for p in pending if (p.get("spec") or {}).get("topologySpreadConstraints")}
    inp, _problems = scheduling_input(snap, pending)   # gives the pods the default spread (scheduling/default_spread.py)
    defaulted = [pod_key(p) for p in inp.pods
                 if (p.get("spec") or {}).get("topologySpreadConstraints") and pod_key(p) not in own] if default_spread else []
    result = solve(inp, min_values_policy=policy)
    from karpenter_lambda.catalog.reservations import allot_reservations

    allotted = allot_reservations(result.nodeclaims)
    add_placements(given_entries, result.existing or {})
    t2 = time.monotonic()
    return result, {"pods": len(pending), "catalog_seconds": t1 - t0, "solve_seconds": t2 - t1, "zones": used_zones,
                    "reservations": allotted, "overlayConflicts": overlay_conflicts, "gated": gated,
                    "defaultSpread": [dict(c) for c in default_spread], "defaultSpreadPods": defaulted,
                    "given": given_entries}


def _with_namespace(doc: dict) -> dict:
    """A namespaced manifest as the API server holds it: ``metadata.namespace`` set (``default`` when left out)."""
    meta = doc.get("metadata") or {}
    if meta.get("namespace"):
        return doc
    return {**doc, "metadata": {**meta, "namespace": "default"}}


def _apply_overlays(snap, nodepools, overlays) -> dict[str, str]:
    """The NodeOverlays of the input on every NodePool's catalog, as the controllers' snapshot loader applies the
    stored ones (catalog.overlay); returns {overlay: why it was not applied} for conflicting ones."""
    if not overlays:
        return {}
    from karpenter_lambda.catalog.overlay import apply_overlays_by_nodepool

    res = apply_overlays_by_nodepool(snap.instance_types, {np.name: np for np in nodepools}, overlays)
    snap.instance_types = res.instance_types
    return dict(res.conflicts)


def _reservations(nodeclasses: dict, path: str | None, clients, region: str, endpoint_url: str | None) -> dict[str, list]:
    """EC2NodeClass name -> the capacity reservations its selector terms select: from the saved answer ``path``, else
    from EC2 (``clients``: a boto3 Session, when the catalog comes from EC2), else none."""
    from karpenter_lambda.adapters.aws import capacity_reservations as crs

    now = time.time()
    with_terms = {n: nc.spec.get("capacityReservationSelectorTerms") or [] for n, nc in nodeclasses.items()}
    if path is not None:
        try:
            entries = crs.read_file(path, now)
        except ValueError as e:
            raise PlanEnvironmentError(f"--capacity-reservations {e}") from None
        return {n: crs.select(entries, terms, now) for n, terms in with_terms.items() if terms}
    if clients is None or not any(with_terms.values()):
        return {}
    ec2 = clients.client("ec2", region_name=region, endpoint_url=endpoint_url)
    return {n: crs.resolve(ec2, terms, now)[0] for n, terms in with_terms.items() if terms}


def _stateful_claims(pods: list[dict], docs: list[dict], pvcs: list[dict]) -> None:
    """A StatefulSet's pods use their ``volumeClaimTemplates`` claims (``<template>-<sts>-<ordinal>``); a claim the
    files do not give is created as its controller would, unbound, from the template (so its StorageClass decides)."""
    given = {((c.get("metadata") or {}).get("namespace") or "default", (c.get("metadata") or {}).get("name")) for c in pvcs}
    add_claim_volumes(pods, docs)
    by_name = {((d.get("metadata") or {}).get("namespace") or "default", (d.get("metadata") or {}).get("name")): d
               for d in docs if claim_templates(d)}
    for pod in pods:
        ref = next((r for r in (pod.get("metadata") or {}).get("ownerReferences") or () if r.get("kind") == "StatefulSet"), None)
        doc = by_name.get(((pod.get("metadata") or {}).get("namespace") or "default", ref.get("name"))) if ref else None
        for claim in stateful_claims(doc, pod) if doc else ():
            key = (claim["metadata"]["namespace"], claim["metadata"]["name"])
            if key not in given:
                given.add(key)
                pvcs.append(claim)


def _known_regions() -> set[str]:
    """EC2 regions of every partition botocore knows (the offline data is moto's, for those regions)."""
    from karpenter_lambda.adapters.aws.moto_catalog import known_regions

    return set(known_regions())


def _chosen_offering(c):
    """The offering the NodeClaim is priced at (its instance type, zone and capacity type), or None."""
    for it in c.instance_types:
        if it.name == c.instance_type:
            for o in it.offerings:
                if o.zone == c.zone and o.capacity_type == c.capacity_type:
                    return o
    return None


def _price_estimated(c) -> bool:
    """Whether the NodeClaim's price is an estimate: the chosen offering's ``price_estimated``."""
    o = _chosen_offering(c)
    return bool(o is not None and o.price_estimated)


def _price_overlay(c) -> tuple[str | None, float | None]:
    """(the NodeOverlay that set the chosen offering's price, the price before it), or (None, None)."""
    from karpenter_lambda.catalog.overlay import offering_overlay

    o = _chosen_offering(c)
    name = offering_overlay(o) if o is not None else None
    return (name, round(o.base_price, 6)) if name else (None, None)


def plan_to_json(result, zones: list[str] | None = None, reservations: dict[str, str] | None = None) -> dict:
    claims = []
    for c in result.nodeclaims:
        claims.append({
            "name": c.name,
            "nodePool": c.nodepool,
            "instanceTypes": [it.name for it in c.instance_types],
            "instanceType": c.instance_type,
            "zone": c.zone,
            "capacityType": c.capacity_type,
            "pricePerHour": round(c.price, 6),
            "priceEstimated": _price_estimated(c),
            "pods": list(c.pods),
            "reason": c.reason,
            "capacityReservationId": (reservations or {}).get(c.name),
            "priceOverlay": _price_overlay(c)[0],
            "basePricePerHour": _price_overlay(c)[1],
        })
        if getattr(c, "min_values_relaxed", False):   # the BestEffort minValues policy lowered one (docs/scheduling.md)
            claims[-1]["minValuesRelaxed"] = True
    return {
        "nodeClaims": claims,
        "unschedulable": [{"pod": u.pod, "reason": u.reason} for u in result.unschedulable],
        "costPerHour": round(sum(c.price for c in result.nodeclaims), 6),
        "costEstimated": any(c["priceEstimated"] for c in claims),
        "existing": {k: list(v) for k, v in (result.existing or {}).items()},
        "zones": list(zones or []),
    }


def run(args) -> int:
    def progress(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr)

    from pathlib import Path

    args.files = list(args.files or []) + list(getattr(args, "more_files", None) or [])
    if not args.files:
        print("error: plan: no manifest given: pass files or directories (plan FILE... or plan -f FILE ...)",
              file=sys.stderr)
        return 2
    missing = [f for f in args.files if f != "-" and not Path(f).exists()]
    if missing:
        for f in missing:
            print(f"error: {f}: no such file or directory", file=sys.stderr)
        return 2
    region = getattr(args, "plan_region", None) or args.region
    if not args.live and not args.endpoint_url:
        known = _known_regions()
        if known and region not in known:
            print(f"error: --region {region!r}: not an AWS region with EC2 data (e.g. us-east-1, eu-west-1)", file=sys.stderr)
            return 2
    zones = None
    if getattr(args, "plan_zones", None) is not None:
        from karpenter_lambda.catalog.zones import parse_zones

        try:
            zones = parse_zones(region, args.plan_zones)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        version = kubernetes_version(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        settings = catalog_settings_of(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        sched_config, sched_source = scheduler_config_of(args)
    except SchedulerConfigFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:   # a bad document: an input error (the file), or the environment's (the variable)
        print(f"error: {e}", file=sys.stderr)
        return 2 if getattr(args, "scheduler_config", None) is None else 1
    stdin = read_stdin() if "-" in args.files else None   # FILE - (or -f -): the manifests on standard input
    try:
        result, info = build_plan(args.files, region, args.endpoint_url, args.live, progress, zones=zones,
                                  reservations_file=getattr(args, "plan_reservations", None),
                                  kubernetes_version=version, catalog_settings=settings, scheduler_config=sched_config,
                                  stdin=stdin)
    except PlanEnvironmentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = plan_to_json(result, info["zones"], info.get("reservations"))
    out["gated"] = info.get("gated") or []
    out["defaultSpreadConstraints"] = info.get("defaultSpread") or []
    out["defaultSpreadPods"] = info.get("defaultSpreadPods") or []
    out["givenNodeClaims"] = info.get("given") or []
    for name, why in sorted((info.get("overlayConflicts") or {}).items()):
        print(f"warning: NodeOverlay {name} not applied: {why}", file=sys.stderr)
    status = EXIT_UNSCHEDULABLE if out["unschedulable"] else 0
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return status
    if out["unschedulable"]:   # first: what a pipeline must not miss
        print(render_table(["UNSCHEDULABLE POD", "REASON"], [[u["pod"], u["reason"]] for u in out["unschedulable"]]))
        print()
    if out["givenNodeClaims"]:
        print(render_given(out["givenNodeClaims"]))
        print()
    if out["nodeClaims"]:
        rows = []
        for c in out["nodeClaims"]:
            price = f"{'~' if c['priceEstimated'] else ''}${c['pricePerHour']:.4f}{'*' if c.get('priceOverlay') else ''}"
            capacity = c["capacityType"] + (f" ({c['capacityReservationId']})" if c.get("capacityReservationId") else "")
            rows.append([c["name"], c["nodePool"], c["instanceType"], c["zone"], capacity,
                         price, len(c["pods"]), len(c["instanceTypes"])])
        print(render_table(["NODECLAIM", "NODEPOOL", "INSTANCE-TYPE", "ZONE", "CAPACITY", "PRICE/H", "PODS", "OPTIONS"], rows, right={5, 6, 7}))
        print()
        print("PODS: pending pods placed on the NodeClaim.  OPTIONS: instance types the NodeClaim may launch as "
              "(CreateFleet overrides, cheapest first).")
        for name in sorted({c["priceOverlay"] for c in out["nodeClaims"] if c.get("priceOverlay")}):
            print(f"*: price set by NodeOverlay {name} (list price in --json basePricePerHour)")
        if out["costEstimated"]:
            print("~: estimated spot price (no spot price history for that type and zone; a deployed controller "
                  "does not launch such offerings, see docs/catalog.md).")
    elif not out["unschedulable"]:
        print("no new nodes needed")
    else:
        print(f"no new nodes: {len(out['unschedulable'])} pod(s) cannot be placed (above)")
    for g in out["gated"]:
        print(f"gated: {g['pod']}: scheduling gates {', '.join(g['gates'])}: not provisioned for until they are removed "
              f"(as Karpenter)")
    print()
    if out["defaultSpreadConstraints"]:
        n = len(out["defaultSpreadPods"])
        print(f"default topology spread ({sched_source}): "
              f"{'; '.join(describe_constraint(c) for c in out['defaultSpreadConstraints'])}: given to {n} of "
              f"{info['pods']} pending pod(s) (those without constraints of their own and selected by a Service or "
              f"a ReplicaSet / StatefulSet)")
    elif sched_config is not None:
        print(f"default topology spread ({sched_source}): no default constraints")
    zone_note = "--zones" if zones is not None else "the simulator's subnets; change with --zones"
    print(f"zones: {', '.join(out['zones']) or '(none)'} ({zone_note})")
    launched = [g for g in out["givenNodeClaims"] if g["launchable"]]
    if out["givenNodeClaims"]:
        print(f"{len(launched)} of {len(out['givenNodeClaims'])} given NodeClaim(s) launched as they are, "
              f"${sum(g['pricePerHour'] for g in launched):.4f}/h (not in the cost below)")
    print(f"{len(out['nodeClaims'])} new node(s), {info['pods']} pending pod(s), {len(out['unschedulable'])} unschedulable; "
          f"cost ${out['costPerHour']:.4f}/h{' (with ~estimated spot prices)' if out['costEstimated'] else ''} "
          f"(catalog {info['catalog_seconds']:.1f}s, solve {info['solve_seconds']*1000:.0f}ms)")
    if status:
        print(f"exit {status}: {len(out['unschedulable'])} pod(s) unschedulable (docs/cli.md)", file=sys.stderr)
    return status
