"""The provisioner: pending pods -> scheduling round -> NodeClaims -> EC2 CreateFleet.

``Provisioner(...).provision(pods) -> ProvisionReport``.  One round:

1. Load NodePools, EC2NodeClasses and NodeClaims (store), the pods, nodes and DaemonSets (kube) and the
   live pod reservations and NodePool usage (:mod:`.claims`).
2. Keep the pods that still need a node: not deleted, not bound, not terminal, not DaemonSet-owned and
   not reserved by a NodeClaim that still exists (in flight).
3. Build the instance types of every NodePool from its EC2NodeClass (catalog; EC2 descriptions cached
   per process) minus offerings marked unavailable, and solve (scheduling).
4. For each NodeClaim plan: resolve the EC2NodeClass (status written back), commit the claim (one
   DynamoDB transaction: NodePool usage within limits + pod reservations; a duplicate plan is
   refused here), write the NodeClaim, ensure launch templates, CreateFleet; on insufficient capacity
   retry with the remaining offerings; when nothing remains, release the claim, delete the NodeClaim
   and report the pods unschedulable with the reason.

Idempotency and concurrency are described in docs/provisioning.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..api import labels as wk
from ..api.objects import EC2NodeClass, NodeClaim, NodePool
from ..api.quantity import QuantityError, format_resource, parse_resource_list, resource_value
from . import runtime
from .cluster_state import (
    as_dict,
    is_daemon_pod,
    is_terminal,
    node_allocatable,
    pod_key,
    pod_uid,
    provider_id,
)

NOMINATED_PODS_ANNOTATION = "karpenter-lambda.io/nominated-pods"      # JSON list of "ns/name"
NOMINATED_UIDS_ANNOTATION = "karpenter-lambda.io/nominated-pod-uids"  # JSON list of pod uids
PRICE_ANNOTATION = "karpenter-lambda.io/price-per-hour"
MAX_LAUNCH_ATTEMPTS = 6

log = logging.getLogger(__name__)


@dataclass
class Launched:
    nodeclaim: str
    nodepool: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    image_id: str | None
    pods: list[str]

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class ProvisionReport:
    launched: list[Launched] = field(default_factory=list)
    existing: dict[str, list[str]] = field(default_factory=dict)  # pods that fit existing/in-flight capacity
    unschedulable: list[dict] = field(default_factory=list)        # {"pod": "ns/name", "reason": str}
    skipped: list[dict] = field(default_factory=list)              # {"pod", "reason"}: bound, nominated, deleted...
    duplicates: list[str] = field(default_factory=list)            # NodeClaims a previous delivery already made
    errors: list[str] = field(default_factory=list)

    @property
    def pods_scheduled(self) -> int:
        return sum(len(x.pods) for x in self.launched) + sum(len(v) for v in self.existing.values())

    @property
    def cost_per_hour(self) -> float:
        return sum(x.price for x in self.launched)

    def to_dict(self) -> dict:
        return {
            "launched": [x.to_dict() for x in self.launched],
            "existing": self.existing,
            "unschedulable": self.unschedulable,
            "skipped": self.skipped,
            "duplicates": self.duplicates,
            "errors": self.errors,
            "costPerHour": round(self.cost_per_hour, 6),
        }


# ----------------------------------------------------------------------------------------------
# Instance type data: EC2 descriptions are fetched once per process (moto's full call takes seconds); the built
# instance types (with their prices) are kept CATALOG_TTL_SECONDS of real time, so a warm Lambda container
# picks up new prices (Pricing API / spot history through the DynamoDB price cache).
CATALOG_TTL_SECONDS = 300.0
_catalog_cache: dict[tuple, tuple[float, list]] = {}


def _catalog_key(nodeclass: EC2NodeClass | None, zones, unavailable) -> tuple:
    spec = json.dumps(nodeclass.spec if nodeclass is not None else None, sort_keys=True, default=str)
    return (hashlib.sha256(spec.encode()).hexdigest(), tuple(sorted(zones or ())), tuple(sorted(unavailable)))


def default_catalog_loader(ec2, region: str, nodeclass: EC2NodeClass | None, zones: list[str] | None,
                           unavailable: set, *, pricing=None, price_cache=None) -> list:
    """Instance types for one EC2NodeClass (cached per process by nodeclass spec, zones, unavailable set, for
    CATALOG_TTL_SECONDS).  Prices: on-demand from the Pricing API (``pricing`` client) and spot from the price
    history, both through the DynamoDB ``price_cache`` when given; the bundled table / estimate otherwise."""
    key = (region,) + _catalog_key(nodeclass, zones, unavailable)
    hit = _catalog_cache.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < CATALOG_TTL_SECONDS:
        return hit[1]
    from ..adapters.aws import ec2_catalog

    clients = {"ec2": ec2, "pricing": pricing}
    types = ec2_catalog.load_catalog(clients, region, nodeclass=nodeclass, unavailable=frozenset(unavailable),
                                     zones=zones, cache=price_cache)
    if len(_catalog_cache) > 64:
        _catalog_cache.clear()
    _catalog_cache[key] = (now, types)
    return types


def limits_of(nodepool: NodePool) -> dict[str, int]:
    out = {}
    for k, v in (nodepool.limits or {}).items():
        try:
            out[k] = resource_value(k, v)
        except QuantityError:
            continue
    return out


def nodeclaim_name(nodepool: str, pod_uids: list[str]) -> str:
    """Deterministic: the NodePool name + a hash of the pods the NodeClaim was made for."""
    h = hashlib.sha256("\n".join(sorted(pod_uids)).encode()).hexdigest()[:10]
    return f"{nodepool}-{h}"[:63]


# ----------------------------------------------------------------------------------------------
# Taints a node carries only while it comes up (Karpenter ignores them, and the NodeClaim's startup taints,
# when it simulates scheduling onto a managed node that is not initialized yet).
EPHEMERAL_TAINT_KEYS = frozenset({
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "karpenter.sh/unregistered",
})


def scheduling_taints(node: dict, nodeclaim=None) -> list[dict]:
    """The taints the solver should honour on ``node``.

    A node that karpenter-lambda launched (``nodeclaim`` given) and that is not Initialized yet still carries
    the ephemeral taints above and its startup taints; both go away by themselves, so, as Karpenter does,
    they do not block placing pods there.  Otherwise the node's taints are taken as they are.
    """
    taints = list((node.get("spec") or {}).get("taints") or [])
    if nodeclaim is None or nodeclaim.is_true("Initialized"):
        return taints
    startup = {(t.get("key"), t.get("effect")) for t in (nodeclaim.spec.get("startupTaints") or [])}
    return [t for t in taints if t.get("key") not in EPHEMERAL_TAINT_KEYS and (t.get("key"), t.get("effect")) not in startup]


class Provisioner:
    def __init__(self, store, ec2, ssm, iam, kube, cluster, clock: Callable[[], float] | None = None,
                 unavailable=None, claims=None, *, region: str = "us-east-1", logger=None,
                 catalog_loader: Callable[..., list] | None = None, solver: Callable | None = None,
                 node_role: str | None = None, pricing=None, price_cache=None):
        self.store = store
        self.ec2, self.ssm, self.iam = ec2, ssm, iam
        self.kube = kube
        self.cluster = cluster  # environment.ClusterDescription-like: name, endpoint, ca_b64, version, service_cidr
        self.clock = clock or runtime.clock_proxy
        self.unavailable = unavailable
        self.claims = claims
        self.region = region
        self.logger = logger or log
        self.catalog_loader = catalog_loader or default_catalog_loader
        self.solver = solver
        self.node_role = node_role
        self.pricing = pricing            # Pricing API client (on-demand prices), None: bundled table
        self.price_cache = price_cache    # adapters.aws.pricing_cache.PriceCache, None: no DynamoDB price cache
        self._resolved: dict[str, Any] = {}
        self._limit_retried: set[str] = set()

    @classmethod
    def from_environment(cls, env, logger=None) -> "Provisioner":
        return cls(env.store, env.ec2, env.ssm, env.iam, env.kube, env.cluster, runtime.clock_proxy, env.unavailable,
                   env.claims, region=env.config.region, logger=logger, node_role=env.config.node_role,
                   pricing=env.pricing, price_cache=env.price_cache)

    # -- logging: one structured line per decision ------------------------------------------------
    def _decision(self, decision: str, message: str, **fields) -> None:
        extra = {"decision": decision, **fields}
        try:
            self.logger.info(message, extra=extra)
        except TypeError:  # a plain logging.Logger with reserved keys
            self.logger.info("%s %s", message, json.dumps(extra, default=str))

    # -- the round ----------------------------------------------------------------------------------
    def provision(self, pods: list[dict]) -> ProvisionReport:
        report = ProvisionReport()
        now = self.clock()
        nodepools: list[NodePool] = [np for np in self.store.list("NodePool") if not np.metadata.get("deletionTimestamp")]
        nodeclasses: dict[str, EC2NodeClass] = {nc.name: nc for nc in self.store.list("EC2NodeClass")}
        nodeclaims: dict[str, NodeClaim] = {nc.name: nc for nc in self.store.list("NodeClaim")}
        live_pods = [as_dict(p) for p in self.kube.list_pods()]
        nodes = [as_dict(n) for n in self.kube.list_nodes()]
        daemonsets = [as_dict(d) for d in self.kube.list_daemonsets()]
        reservations = self.claims.reservations() if self.claims is not None else {}

        pending = self._pods_to_schedule(pods, live_pods, reservations, nodeclaims, report)
        if not pending:
            return report
        for attempt in range(3):  # re-plan when a concurrent invocation took pods or limit room
            retry = self._round(pending, nodepools, nodeclasses, nodeclaims, live_pods, nodes, daemonsets, report, now)
            if not retry:
                break
            pending = retry
            nodeclaims = {nc.name: nc for nc in self.store.list("NodeClaim")}
        else:
            for p in pending:
                report.unschedulable.append({"pod": pod_key(p), "reason": "conflicting concurrent provisioning; will retry"})
        return report

    def _pods_to_schedule(self, pods, live_pods, reservations, nodeclaims, report) -> list[dict]:
        live_by_uid = {pod_uid(p): p for p in live_pods}
        out, seen = [], set()
        for msg_pod in pods:
            uid = pod_uid(msg_pod)
            if uid in seen:
                continue
            seen.add(uid)
            pod = live_by_uid.get(uid)
            key = pod_key(msg_pod)
            if pod is None:
                reason = "pod no longer exists"
            elif (pod.get("spec") or {}).get("nodeName"):
                reason = f"already bound to {pod['spec']['nodeName']}"
            elif is_terminal(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
                reason = "pod is terminating or finished"
            elif is_daemon_pod(pod):
                reason = "DaemonSet pod"
            elif uid in reservations and reservations[uid] in nodeclaims:
                reason = f"nominated to in-flight NodeClaim {reservations[uid]}"
            else:
                out.append(pod)
                continue
            report.skipped.append({"pod": key, "reason": reason})
            self._decision("skip", f"pod {key} skipped: {reason}", pod=key)
        return out

    def _existing_nodes(self, nodes, live_pods, nodeclaims, reservations_by_claim, pods_by_uid):
        from ..scheduling import ExistingNode

        by_node: dict[str, list[dict]] = {}
        for p in live_pods:
            nn = (p.get("spec") or {}).get("nodeName")
            if nn and not is_terminal(p):
                by_node.setdefault(nn, []).append(p)
        out = []
        registered = set()
        claim_of_node = {nc.status.get("nodeName"): nc for nc in nodeclaims.values() if nc.status.get("nodeName")}
        claim_of_provider = {nc.status.get("providerID"): nc for nc in nodeclaims.values() if nc.status.get("providerID")}
        for n in nodes:
            meta, spec = n.get("metadata") or {}, n.get("spec") or {}
            if meta.get("deletionTimestamp") or spec.get("unschedulable"):
                continue
            name = meta.get("name")
            nc = claim_of_node.get(name) or claim_of_provider.get(spec.get("providerID"))
            extra = []
            if nc is not None:
                registered.add(nc.name)
                extra = [pods_by_uid[u] for u in reservations_by_claim.get(nc.name, []) if u in pods_by_uid
                         and not (pods_by_uid[u].get("spec") or {}).get("nodeName")]
            labels = meta.get("labels") or {}
            out.append(ExistingNode(
                name=name, labels=dict(labels), taints=scheduling_taints(n, nc),
                allocatable=node_allocatable(n), pods=by_node.get(name, []) + extra,
                nodepool=labels.get(wk.NODEPOOL), in_flight=False,
                instance_type=labels.get(wk.INSTANCE_TYPE), zone=labels.get(wk.ZONE),
                capacity_type=labels.get(wk.CAPACITY_TYPE),
                price=_float(((nc.annotations if nc else {}) or {}).get(PRICE_ANNOTATION)),
            ))
        for nc in nodeclaims.values():
            if nc.name in registered or nc.metadata.get("deletionTimestamp") or nc.status.get("nodeName"):
                continue
            alloc = parse_resource_list(nc.status.get("allocatable") or {}) if nc.status.get("allocatable") else {}
            if not alloc:  # not launched yet: nothing to place on
                continue
            labels = dict(nc.labels)
            pods = [pods_by_uid[u] for u in reservations_by_claim.get(nc.name, []) if u in pods_by_uid]
            out.append(ExistingNode(
                name=nc.name, labels=labels, taints=list(nc.spec.get("taints") or []), allocatable=alloc,
                pods=pods, nodepool=labels.get(wk.NODEPOOL), in_flight=True,
                instance_type=labels.get(wk.INSTANCE_TYPE), zone=labels.get(wk.ZONE),
                capacity_type=labels.get(wk.CAPACITY_TYPE), price=_float(nc.annotations.get(PRICE_ANNOTATION)),
            ))
        return out

    def _round(self, pending, nodepools, nodeclasses, nodeclaims, live_pods, nodes, daemonsets, report, now):
        from ..scheduling import NodePoolInput, SchedulingInput, solve

        solver = self.solver or solve
        reservations = self.claims.reservations() if self.claims is not None else {}
        reservations_by_claim: dict[str, list[str]] = {}
        for uid, ncname in reservations.items():
            reservations_by_claim.setdefault(ncname, []).append(uid)
        pods_by_uid = {pod_uid(p): p for p in live_pods}
        usage_all = self.claims.all_usage() if self.claims is not None else {}

        unavailable = set(self.unavailable.all()) if self.unavailable is not None else set()
        np_inputs = []
        blocked: list[str] = []
        for np in sorted(nodepools, key=lambda n: (-n.weight, n.name)):
            ref = np.node_class_ref
            nc = nodeclasses.get(ref.get("name", ""))
            if nc is None:
                blocked.append(f"NodePool {np.name}: EC2NodeClass {ref.get('name')!r} not found")
                continue
            resolved, problem = self._resolve(nc)
            if problem:
                blocked.append(f"NodePool {np.name}: EC2NodeClass {nc.name} not ready: {problem}")
                continue
            zones = sorted({s["zone"] for s in _subnets(resolved)})
            if self.catalog_loader is default_catalog_loader:
                types = default_catalog_loader(self.ec2, self.region, nc, zones, unavailable,
                                               pricing=self.pricing, price_cache=self.price_cache)
            else:
                types = self.catalog_loader(self.ec2, self.region, nc, zones, unavailable)
            np_inputs.append(NodePoolInput(nodepool=np, instance_types=types))
        if not np_inputs:
            reason = "; ".join(blocked) or "no NodePool exists"
            for p in pending:
                report.unschedulable.append({"pod": pod_key(p), "reason": reason})
                self._decision("unschedulable", f"pod {pod_key(p)} unschedulable: {reason}", pod=pod_key(p), reason=reason)
            return []

        existing = self._existing_nodes(nodes, live_pods, nodeclaims, reservations_by_claim, pods_by_uid)
        usage = {name: totals for name, (totals, _claims) in usage_all.items()}
        result = solver(SchedulingInput(pods=pending, nodepools=np_inputs, existing_nodes=existing,
                                        daemonsets=daemonsets, nodepool_usage=usage, max_instance_types=60))
        for node_name, placed in (result.existing or {}).items():
            if placed:
                report.existing.setdefault(node_name, []).extend(placed)
                self._decision("existing", f"{len(placed)} pods fit on {node_name}", node=node_name, pods=placed)
        for u in result.unschedulable:
            reason = u.reason + (("; " + "; ".join(blocked)) if blocked else "")
            report.unschedulable.append({"pod": u.pod, "reason": reason})
            self._decision("unschedulable", f"pod {u.pod} unschedulable: {reason}", pod=u.pod, reason=reason)

        pod_by_key = {pod_key(p): p for p in pending}
        retry: list[dict] = []
        np_by_name = {np.name: np for np in nodepools}
        for plan in result.nodeclaims:
            np = np_by_name[plan.nodepool]
            nc = nodeclasses[np.node_class_ref.get("name")]
            plan_pods = [pod_by_key[k] for k in plan.pods if k in pod_by_key]
            again = self._execute(plan, np, nc, plan_pods, report, now)
            retry.extend(again)
        return retry

    # -- EC2NodeClass resolution --------------------------------------------------------------------
    def _resolve(self, nodeclass: EC2NodeClass):
        """(resolved, problem) with the status written back to the store when it changed."""
        hit = self._resolved.get(nodeclass.name)
        if hit is not None:
            return hit
        from ..adapters.aws.nodeclass_resolver import NodeClassResolver

        resolver = NodeClassResolver(self.ec2, self.ssm, self.iam, self.cluster.name, self.cluster.version, self.region)
        try:
            resolved = resolver.resolve(nodeclass)
        except Exception as e:  # a broken nodeclass must not fail the other NodePools
            self._resolved[nodeclass.name] = (None, str(e))
            return None, str(e)
        status = resolved.status_patch()
        problem = _not_ready_reason(status)
        try:
            current = self.store.get("EC2NodeClass", nodeclass.name)
            if current is not None and _status_differs(current.status, status):
                self.store.update_status("EC2NodeClass", nodeclass.name, status)
        except Exception as e:
            self.logger.warning(f"could not write EC2NodeClass {nodeclass.name} status: {e}")
        self._resolved[nodeclass.name] = (resolved, problem)
        return resolved, problem

    # -- one plan -----------------------------------------------------------------------------------
    def _execute(self, plan, np: NodePool, nodeclass: EC2NodeClass, plan_pods: list[dict], report, now) -> list[dict]:
        uids = sorted(pod_uid(p) for p in plan_pods)
        keys = [pod_key(p) for p in plan_pods]
        name = nodeclaim_name(np.name, uids)
        limits = limits_of(np)
        request = _claim_request(plan, limits)
        if self.claims is not None:
            commit = self.claims.commit(np.name, name, request, limits, uids)
            if not commit.ok:
                if commit.duplicate:
                    report.duplicates.append(name)
                    self._decision("duplicate", f"NodeClaim {name} already provisioned; nothing launched", nodeclaim=name)
                    return []
                if commit.limit_exceeded and not commit.taken_pods:
                    # re-plan with the fresh usage; if nothing fits the solver explains the limit
                    self._decision("retry", f"NodePool {np.name} limits changed concurrently: re-planning",
                                   nodeclaim=name, detail=commit.message)
                    if name in self._limit_retried:
                        return self._unschedulable(plan_pods, commit.message, report)
                    self._limit_retried.add(name)
                    return plan_pods
                taken = set(commit.taken_pods)
                for p in plan_pods:
                    if pod_uid(p) in taken:
                        report.skipped.append({"pod": pod_key(p), "reason": "nominated by a concurrent provisioner"})
                self._decision("retry", f"{len(taken)} pods of {name} taken by a concurrent invocation: re-planning the rest",
                               nodeclaim=name)
                return [p for p in plan_pods if pod_uid(p) not in taken]
        resolved, _ = self._resolve(nodeclass)
        doc = self._nodeclaim_doc(name, plan, np, nodeclass, keys, uids, now)
        try:
            self.store.create(NodeClaim(doc))
        except Exception as e:
            from ..adapters.store import AlreadyExists

            if isinstance(e, AlreadyExists):
                report.duplicates.append(name)
                self._decision("duplicate", f"NodeClaim {name} exists; nothing launched", nodeclaim=name)
                return []
            if self.claims is not None:
                self.claims.release(np.name, name)
            raise
        try:
            launched, why = self._launch(name, plan, np, nodeclass, resolved, keys)
        except Exception as e:
            self._rollback(name, np.name)
            report.errors.append(f"NodeClaim {name}: {e}")
            self._unschedulable(plan_pods, f"launch failed: {e}", report)
            return []
        if launched is None:
            self._rollback(name, np.name)
            self._unschedulable(plan_pods, why, report)
            return []
        report.launched.append(launched)
        self._decision("launch", f"launched {launched.instance_type} {launched.capacity_type} in {launched.zone} "
                                 f"({launched.instance_id}) for {len(keys)} pods as NodeClaim {name}",
                       nodeclaim=name, nodepool=np.name, instanceId=launched.instance_id,
                       instanceType=launched.instance_type, zone=launched.zone, capacityType=launched.capacity_type,
                       pricePerHour=launched.price, pods=keys, why=getattr(plan, "reason", ""))
        return []

    def _unschedulable(self, plan_pods, reason, report) -> list:
        for p in plan_pods:
            report.unschedulable.append({"pod": pod_key(p), "reason": reason})
            self._decision("unschedulable", f"pod {pod_key(p)} unschedulable: {reason}", pod=pod_key(p), reason=reason)
        return []

    def _rollback(self, name: str, nodepool: str) -> None:
        try:
            self.store.delete("NodeClaim", name)
        finally:
            if self.claims is not None:
                self.claims.release(nodepool, name)

    def _nodeclaim_doc(self, name, plan, np: NodePool, nodeclass: EC2NodeClass, keys, uids, now) -> dict:
        labels = dict(np.template_labels)
        try:
            labels.update({k: v for k, v in plan.requirements.labels().items() if not k.startswith(wk.AWS) or k in wk.AWS_WELL_KNOWN})
        except Exception:
            pass
        labels[wk.NODEPOOL] = np.name
        labels[wk.EC2NODECLASS] = nodeclass.name
        reqs = plan.requirements.to_list() if hasattr(plan.requirements, "to_list") else list(plan.requirements or [])
        reqs = [r for r in reqs if r.get("key") != wk.INSTANCE_TYPE]
        reqs.append({"key": wk.INSTANCE_TYPE, "operator": "In", "values": [it.name for it in plan.instance_types]})
        tspec = np.template_spec
        spec = {
            "nodeClassRef": dict(np.node_class_ref),
            "requirements": reqs,
            "resources": {"requests": {k: format_resource(k, v) for k, v in sorted((plan.requests or {}).items())}},
            "expireAfter": np.expire_after,
        }
        for f in ("taints", "startupTaints", "terminationGracePeriod"):
            if tspec.get(f):
                spec[f] = tspec[f]
        annotations = dict(np.template_annotations)
        annotations[NOMINATED_PODS_ANNOTATION] = json.dumps(keys)
        annotations[NOMINATED_UIDS_ANNOTATION] = json.dumps(uids)
        return {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": labels, "annotations": annotations,
                         "finalizers": [wk.TERMINATION_FINALIZER]},
            "spec": spec,
            "status": {"conditions": [_condition("Launched", "Unknown", "Launching", "creating the instance", now)]},
        }

    # -- launch ---------------------------------------------------------------------------------------
    def _launch(self, name, plan, np: NodePool, nodeclass: EC2NodeClass, resolved, keys):
        """CreateFleet with ICE fallback; returns (Launched | None, reason when None)."""
        from . import launch as launch_mod

        return launch_mod.launch_plan(self, name, plan, np, nodeclass, resolved, keys)


# ----------------------------------------------------------------------------------------------
def _float(v) -> float | None:
    try:
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _subnets(resolved) -> list[dict]:
    subs = getattr(resolved, "subnets", None) or []
    return [s if isinstance(s, dict) else s.__dict__ for s in subs]


def _claim_request(plan, limits: dict[str, int]) -> dict[str, int]:
    """What a NodeClaim counts against its NodePool until launched: the largest capacity among its options."""
    out = {"nodes": 1}
    keys = set(limits) | {"cpu", "memory"}
    keys.discard("nodes")
    for k in keys:
        vals = [it.capacity.get(k, 0) for it in plan.instance_types]
        out[k] = max(vals) if vals else 0
    return out


def _condition(type_: str, status: str, reason: str, message: str, now: float) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": runtime.iso(now)}


def _not_ready_reason(status: dict) -> str | None:
    for c in status.get("conditions") or []:
        if c.get("type") in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady") and c.get("status") == "False":
            return c.get("message") or c.get("reason") or c.get("type")
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "False":
            return c.get("message") or c.get("reason") or "not ready"
    return None


def _strip_times(status: dict) -> dict:
    s = json.loads(json.dumps(status, default=str))
    for c in s.get("conditions") or []:
        c.pop("lastTransitionTime", None)
    return s


def _status_differs(current: dict, new: dict) -> bool:
    cur = {k: current.get(k) for k in new}
    return _strip_times(cur) != _strip_times(new)
