"""Kubernetes RBAC least privilege (issue 21): the grants of infra/rbac/controller-rbac.yaml against the requests the
functions' code makes, both ways -- every request granted, every grant used.

What the code calls is found statically: each function's handler names its controller module, the controller
modules it imports (transitively, within ``controllers/``) are scanned for ``<...>.kube.<method>(`` calls.  What a
KubeClient method sends is found by running it against the project's local API server (sim/kubeapi/), which logs
every request: (API group, resource[/subresource], verb) as RBAC sees it.

The five controller functions share one IAM role (as Karpenter's single controller) and so one Kubernetes group:
its ClusterRole is the union of their requests.  The off-peak function has its own group and ClusterRole; it builds a
Terminator only to call ``request`` (which marks the NodeClaim deleting in DynamoDB), checked here too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "layers/core/python/karpenter_lambda"
CONTROLLERS = PKG / "controllers"
RBAC = REPO / "infra/rbac/controller-rbac.yaml"
CONTROLLER_GROUP, OFFPEAK_GROUP = "karpenter-lambda-controller", "karpenter-lambda-offpeak"
CONTROLLER_FUNCTIONS = ("provisioner", "lifecycle", "drift", "consolidation", "interruption")


# -- what the code calls ---------------------------------------------------------------------------------------


def _kube_calls(path: Path) -> set[str]:
    """Every ``<x>.kube.<method>`` the module references (self.kube, self.s.kube, env.kube, ...)."""
    tree = ast.parse(path.read_text())
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
            and n.value.attr == "kube"}


def _controller_imports(path: Path) -> set[str]:
    """Names of the ``controllers`` modules a module imports (anywhere in it, lazy imports included)."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            mod = n.module or ""
            if n.level == 1:                       # from .x import y / from . import x
                out.update([mod.split(".")[0]] if mod else [a.name for a in n.names])
            elif n.level == 2 and mod.startswith("controllers"):
                out.update([mod.split(".")[1]] if "." in mod else [a.name for a in n.names])
            elif mod.startswith("karpenter_lambda.controllers"):
                parts = mod.split(".")
                out.update([parts[2]] if len(parts) > 2 else [a.name for a in n.names])
    return {m for m in out if (CONTROLLERS / f"{m}.py").exists()}


def _closure(start: set[str]) -> set[str]:
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(_controller_imports(CONTROLLERS / f"{m}.py") - seen)
    return seen


def function_modules(name: str) -> set[str]:
    """The controller modules a function's handler can reach."""
    return _closure(_controller_imports(REPO / "functions" / name / "handler.py"))


def function_kube_methods(name: str) -> set[str]:
    mods = function_modules(name)
    if name == "offpeak":
        mods = mods - {"termination"}           # only Terminator.request: see test_offpeak_terminator_makes_no_kube_call
    return set().union(*(_kube_calls(CONTROLLERS / f"{m}.py") for m in mods))


# -- what a KubeClient method sends --------------------------------------------------------------------------------

NODE = {"metadata": {"name": "n1", "labels": {}}, "spec": {}}
POD = {"metadata": {"name": "p1", "namespace": "dev"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}
# every KubeClient method some function calls -> a call of it on the seeded server (a new method must be added here)
KUBE_CALLS = {
    "list_pods": lambda kc: (kc.list_pods(), kc.list_pods(field_selector="spec.nodeName=")),
    "list_pods_on_node": lambda kc: kc.list_pods_on_node("n1"),
    "list_nodes": lambda kc: kc.list_nodes(),
    "get_node": lambda kc: kc.get_node("n1"),
    "list_daemonsets": lambda kc: kc.list_daemonsets(),
    "list_pdbs": lambda kc: (kc.list_pdbs(), kc.list_pdbs("dev")),
    "list_pvcs": lambda kc: kc.list_pvcs(),
    "list_pvs": lambda kc: kc.list_pvs(),
    "list_storageclasses": lambda kc: kc.list_storageclasses(),
    "list_csinodes": lambda kc: kc.list_csinodes(),
    "list_services": lambda kc: kc.list_services(),
    "list_replicasets": lambda kc: kc.list_replicasets(),
    "list_replicationcontrollers": lambda kc: kc.list_replicationcontrollers(),
    "list_runtimeclasses": lambda kc: kc.list_runtimeclasses(),
    "list_limitranges": lambda kc: kc.list_limitranges(),
    "patch_node": lambda kc: kc.patch_node("n1", {"metadata": {"labels": {"a": "b"}}}),
    "patch_node_labels": lambda kc: kc.patch_node_labels("n1", {"x": "y"}),
    "patch_node_taints": lambda kc: kc.patch_node_taints("n1", add=[{"key": "k", "effect": "NoSchedule"}]),
    "update_node": lambda kc: kc.update_node("n1", lambda node: {"metadata": {"labels": {"u": "1"}}}),
    "create_event": lambda kc: kc.create_event({**NODE, "apiVersion": "v1", "kind": "Node"}, "Reason", "message"),
    "evict_pod": lambda kc: kc.evict_pod("dev", "p1"),
    "evict": lambda kc: kc.evict("dev", "p1"),
    "delete_pod": lambda kc: kc.delete_pod("dev", "p1"),
    "delete_node": lambda kc: kc.delete_node("n1"),
    "list_deployments": lambda kc: kc.list_deployments(),
    "list_statefulsets": lambda kc: kc.list_statefulsets(),
    "list_namespaces": lambda kc: kc.list_namespaces(),
    "list_hpas": lambda kc: kc.list_hpas(),
    "list_scaledobjects": lambda kc: kc.list_scaledobjects(),
    "patch_workload": lambda kc: [kc.patch_workload(k, "dev", n, {"metadata": {"annotations": {"a": "1"}}})
                                  for k, n in (("Deployment", "web"), ("StatefulSet", "db"))],
    "scale_workload": lambda kc: (kc.scale_workload("Deployment", "dev", "web", 0), kc.scale_workload("StatefulSet", "dev", "db", 0)),
    "patch_hpa": lambda kc: kc.patch_hpa("dev", "web", {"spec": {"minReplicas": 1}}),
    "patch_scaledobject": lambda kc: kc.patch_scaledobject("dev", "worker", {"metadata": {"annotations": {"p": "0"}}}),
}


def served(plural: str) -> bool:
    """Does the local API server serve this resource?  (A request for one it does not serve is answered 404, and still
    shows what RBAC would be asked.)"""
    from karpenter_lambda.sim.kubeapi.resources import RESOURCES

    return plural in RESOURCES


def rbac_request(method: str, path: str) -> tuple[str, str, str]:
    """(apiGroup, resource[/subresource], verb) of one logged API request."""
    path, _, query = path.partition("?")
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"GET": ("get" if named else ("watch" if "watch=true" in query else "list")), "PATCH": "patch",
            "PUT": "update", "POST": "create", "DELETE": "delete"}[method]
    return group, resource, verb


@pytest.fixture(scope="module")
def requests_of() -> dict[str, set[tuple[str, str, str]]]:
    """KubeClient method -> the RBAC triples its requests need, measured on the local API server."""
    from karpenter_lambda.adapters.kube.client import KubeClient, KubeError
    from karpenter_lambda.sim.kubeapi import KubeAPIServer

    out = {}
    used = set().union(*(function_kube_methods(f) for f in (*CONTROLLER_FUNCTIONS, "offpeak")))
    for name, call in KUBE_CALLS.items():
        if name not in used:
            continue
        server = KubeAPIServer()
        server.start()
        kc = KubeClient.from_host(server.url, backoff_base=0.001, backoff_cap=0.01, retries=0)
        try:
            s = server.store
            s.create("namespaces", {"metadata": {"name": "dev"}})
            s.create("nodes", dict(NODE))
            s.create("pods", dict(POD), "dev")
            spec = {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}
            s.create("deployments", {"metadata": {"name": "web", "namespace": "dev"}, "spec": spec})
            s.create("statefulsets", {"metadata": {"name": "db", "namespace": "dev"}, "spec": spec})
            s.create("horizontalpodautoscalers", {"metadata": {"name": "web", "namespace": "dev"}, "spec": {
                "minReplicas": 2, "maxReplicas": 5, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}})
            s.create("scaledobjects", {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                       "metadata": {"name": "worker", "namespace": "dev"}, "spec": {"scaleTargetRef": {"name": "db"}}})
            server.request_log.clear()
            try:
                call(kc)
            except KubeError as e:          # 404: a resource the local server does not serve (checked below)
                if e.status != 404:
                    raise
            out[name] = {rbac_request(m, p) for m, p, code in server.requests()}
            assert out[name], name
            assert all(code < 400 or (code == 404 and not served(rbac_request(m, p)[1]))
                       for m, p, code in server.requests()), (name, server.requests())
        finally:
            kc.close()
            server.stop()
    return out


# -- what is granted -------------------------------------------------------------------------------------------------


def grants(role_name: str) -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role_name]
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == role_name]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": role_name}]
    out = set()
    for rule in role["rules"]:
        assert not {"*"} & set(rule["apiGroups"] + rule["resources"] + rule["verbs"]), rule
        out.update((g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"])
    return out


def needed(functions, requests_of) -> set[tuple[str, str, str]]:
    methods = set().union(*(function_kube_methods(f) for f in functions))
    missing = methods - set(KUBE_CALLS)
    assert not missing, f"add to KUBE_CALLS (and check the RBAC): {sorted(missing)}"
    return set().union(*(requests_of[m] for m in methods))


# -- the tests -------------------------------------------------------------------------------------------------------


def test_every_function_is_checked():
    import json

    names = {f["name"] for f in json.loads((REPO / "functions/registry.json").read_text())["functions"]}
    assert names == {*CONTROLLER_FUNCTIONS, "offpeak"}, "a new function needs its Kubernetes group here and in the RBAC"
    # every controller module that talks to Kubernetes is reached by some function (the scan sees every caller)
    talking = {p.stem for p in CONTROLLERS.glob("*.py") if _kube_calls(p)}
    assert talking <= set().union(*(function_modules(f) for f in names)), talking
    # nothing outside controllers/ (but the client itself, the simulator, the CLI) calls the Kubernetes API
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).parts
        if rel[0] not in ("controllers", "sim", "cli") and rel[:2] != ("adapters", "kube"):
            assert not _kube_calls(path), path


def test_the_scan_finds_the_known_calls():
    assert {"list_pods", "list_nodes", "evict", "delete_node", "patch_node_taints", "create_event"} <= \
        function_kube_methods("drift")
    assert function_kube_methods("offpeak") >= {"scale_workload", "patch_hpa", "list_pods"}
    assert not function_kube_methods("offpeak") & {"evict_pod", "evict", "delete_node", "delete_pod", "patch_node_taints"}


def test_offpeak_terminator_makes_no_kube_call():
    """The off-peak function's Terminator: only ``request`` is called, and it writes DynamoDB only."""
    offpeak = ast.parse((CONTROLLERS / "offpeak.py").read_text())
    used = {n.attr for n in ast.walk(offpeak) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
            and n.value.attr == "terminator"}
    assert used == {"request"}, used
    termination = ast.parse((CONTROLLERS / "termination.py").read_text())
    [cls] = [n for n in termination.body if isinstance(n, ast.ClassDef) and n.name == "Terminator"]
    [request] = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "request"]
    calls = {n.attr for n in ast.walk(request) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "self"}
    assert "kube" not in calls and "cloud" not in calls, calls


@pytest.mark.parametrize("role,functions", [(CONTROLLER_GROUP, CONTROLLER_FUNCTIONS), (OFFPEAK_GROUP, ("offpeak",))])
def test_every_request_is_granted_and_every_grant_is_used(role, functions, requests_of):
    need, have = needed(functions, requests_of), grants(role)
    assert sorted(need - have) == [], f"{RBAC.name} {role} does not allow what the code does"
    assert sorted(have - need) == [], f"{RBAC.name} {role} grants what no {'/'.join(functions)} code calls"


def test_the_offpeak_group_cannot_touch_nodes_or_evict():
    have = grants(OFFPEAK_GROUP)
    assert not {r for r in have if r[1].startswith("nodes") or r[1] == "pods/eviction" or r[2] == "delete"}


def test_the_stack_maps_each_role_to_its_group(synth):
    from infra.stack import CONTROLLER_KUBERNETES_GROUP, OFFPEAK_KUBERNETES_GROUP

    assert (CONTROLLER_KUBERNETES_GROUP, OFFPEAK_KUBERNETES_GROUP) == (CONTROLLER_GROUP, OFFPEAK_GROUP)
    entries = {k: v["Properties"] for k, v in synth.of_type("AWS::EKS::AccessEntry").items()}
    assert entries["ControllerAccessEntry"]["KubernetesGroups"] == [CONTROLLER_GROUP]
    assert entries["OffPeakAccessEntry"]["KubernetesGroups"] == [OFFPEAK_GROUP]
    # each group is bound in the RBAC file (kubectl apply -f infra/rbac/controller-rbac.yaml)
    names = {d["metadata"]["name"] for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRoleBinding"}
    assert names == {CONTROLLER_GROUP, OFFPEAK_GROUP}
    assert re.search(r"kubectl apply -f infra/rbac/controller-rbac.yaml", RBAC.read_text())
