"""`karpenter-lambda plan`: offline dry run over manifests, human table and the --json contract."""

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml}
spec:
  containers:
    - name: t
      image: x
      resources:
        requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "1"}
        limits: {nvidia.com/gpu: "1"}
"""

HUGE_POD = """
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default}
spec:
  containers:
    - name: t
      image: x
      resources:
        requests: {cpu: "2000", memory: 16Gi}
"""


def _plan_json(capsys, *files, status=0):
    argv = ["plan", "--json"]
    for f in files:
        argv += ["-f", str(f)]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == status, out
    return json.loads(out)


def test_plan_json_contract_and_accounting(capsys):
    data = _plan_json(capsys, EXAMPLES / "default.yaml", EXAMPLES / "workloads" / "web.yaml")
    assert set(data) >= {"nodeClaims", "unschedulable", "costPerHour"}
    assert data["nodeClaims"], "pending pods must produce NodeClaims"
    placed = []
    for c in data["nodeClaims"]:
        assert set(c) >= {"name", "nodePool", "instanceTypes", "instanceType", "zone", "capacityType", "pricePerHour", "pods"}
        assert c["nodePool"] == "default"
        assert 1 <= len(c["instanceTypes"]) <= 60
        assert c["instanceType"] in c["instanceTypes"]
        assert c["capacityType"] in ("on-demand", "spot")
        assert c["zone"].startswith("us-east-1")
        assert c["pricePerHour"] > 0
        # the default NodePool allows only c/m/r generation > 4
        for name in c["instanceTypes"]:
            family = name.split(".")[0]
            assert family[0] in "cmr", name
            assert int("".join(ch for ch in family[1:] if ch.isdigit())[:1]) > 4, name
        placed += c["pods"]
    # 12 web + 6 api + 3 cache; the DaemonSet is overhead, not a pending pod
    assert len(placed) + len(data["unschedulable"]) == 21
    assert len(set(placed)) == len(placed)
    assert data["costPerHour"] == pytest.approx(sum(c["pricePerHour"] for c in data["nodeClaims"]), rel=1e-6)
    # hostname anti-affinity: the three cache pods land on three different NodeClaims
    cache_claims = [c["name"] for c in data["nodeClaims"] for p in c["pods"] if p.startswith("shop/cache-")]
    assert len(cache_claims) == 3 and len(set(cache_claims)) == 3


def test_plan_explains_unschedulable_pods(tmp_path, capsys):
    f = tmp_path / "pods.yaml"
    f.write_text(GPU_POD + "---\n" + HUGE_POD)
    data = _plan_json(capsys, EXAMPLES / "default.yaml", f, status=3)   # exit 3: pods stay unschedulable
    reasons = {u["pod"]: u["reason"] for u in data["unschedulable"]}
    assert set(reasons) == {"ml/trainer", "default/huge"}
    assert "default" in reasons["ml/trainer"] and "nvidia.com/gpu" in reasons["ml/trainer"]
    assert "default" in reasons["default/huge"]
    assert data["nodeClaims"] == [] and data["costPerHour"] == 0


def test_plan_human_output_leads_with_unschedulable_pods_and_exits_3(tmp_path, capsys):
    """Issue 31 item 3: not exit 0 and "no new nodes needed" first when pods cannot be placed."""
    f = tmp_path / "pods.yaml"
    f.write_text(HUGE_POD)
    code = main(["plan", "-f", str(EXAMPLES / "default.yaml"), "-f", str(f)])
    out = capsys.readouterr()
    assert code == 3, out.out
    assert out.out.index("UNSCHEDULABLE POD") < out.out.index("no new nodes")
    assert "no new nodes needed" not in out.out and "exit 3" in out.err


def test_plan_gpu_nodepool_takes_gpu_pod(tmp_path, capsys):
    f = tmp_path / "pods.yaml"
    gpu_pod = GPU_POD.replace("containers:", "tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n  containers:")
    f.write_text(gpu_pod)
    data = _plan_json(capsys, EXAMPLES / "default.yaml", EXAMPLES / "gpu.yaml", f)
    assert not data["unschedulable"], data["unschedulable"]
    (claim,) = data["nodeClaims"]
    assert claim["pods"] == ["ml/trainer"]
    assert claim["nodePool"] != "default"


def test_plan_human_table(capsys):
    code = main(["plan", "-f", str(EXAMPLES / "default.yaml"), "-f", str(EXAMPLES / "workloads" / "web.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    header = out.splitlines()[0]
    for col in ("NODECLAIM", "NODEPOOL", "INSTANCE-TYPE", "ZONE", "CAPACITY", "PRICE/H", "PODS"):
        assert col in header
    assert "cost $" in out


def test_plan_missing_nodeclass_is_an_error(tmp_path, capsys):
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "default.yaml").read_text()) if d and d["kind"] == "NodePool"]
    f = tmp_path / "np.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "-f", str(f)])
    err = capsys.readouterr().err
    assert code == 1
    assert "EC2NodeClass 'default' is not in the given files" in err


def test_plan_invalid_manifest_reports_field(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text((EXAMPLES / "default.yaml").read_text().replace("consolidationPolicy:", "consolidationPolicyy:"))
    code = main(["plan", "-f", str(f)])
    err = capsys.readouterr().err
    assert code == 1
    assert "NodePool/default: spec.disruption.consolidationPolicyy" in err


def test_plan_missing_file_is_usage_error(tmp_path, capsys):
    code = main(["plan", "-f", str(tmp_path / "nope.yaml")])
    assert code == 2
    assert "nope.yaml: no such file" in capsys.readouterr().err


def test_plan_region_option_after_the_subcommand(capsys):
    # the form: plan -f FILE... [--region R] [--json]
    code = main(["plan", "-f", str(EXAMPLES / "default.yaml"), "-f", str(EXAMPLES / "workloads" / "web.yaml"),
                 "--region", "us-west-2", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["nodeClaims"]
    assert all(c["zone"].startswith("us-west-2") for c in data["nodeClaims"])


def test_plan_unknown_region_is_usage_error(capsys):
    code = main(["plan", "-f", str(EXAMPLES / "default.yaml"), "--region", "mars-1", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "--region 'mars-1'" in captured.err


def test_plan_region_without_offline_data_is_environment_error(capsys):
    code = main(["plan", "-f", str(EXAMPLES / "default.yaml"), "--region", "ap-east-2"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--region ap-east-2" in err and "--live" in err


def test_ample_limits_plan_as_cheaply_as_no_limits(tmp_path, capsys):
    """examples/default.yaml's limits (cpu 1000, memory 1000Gi) are far from binding for 21 pods: the plan is the
    one made without limits (the conservative limit-aware packing is only needed when limits bind)."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "default.yaml").read_text()) if d]
    for d in docs:
        if d["kind"] == "NodePool":
            d["spec"].pop("limits")
    unlimited = tmp_path / "unlimited.yaml"
    unlimited.write_text(yaml.safe_dump_all(docs))
    work = EXAMPLES / "workloads" / "web.yaml"
    free = _plan_json(capsys, unlimited, work)
    limited = _plan_json(capsys, EXAMPLES / "default.yaml", work)
    assert limited["costPerHour"] == pytest.approx(free["costPerHour"])
    assert len(limited["nodeClaims"]) == len(free["nodeClaims"])
    assert not limited["unschedulable"]


def test_plan_applies_node_overlays_and_shows_the_adjusted_price(tmp_path, capsys):
    """NodeOverlay (issue 30 item 5) in plan: the overlay's price decides the type, and --json names the overlay."""
    pods = tmp_path / "pods.yaml"
    pods.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n"
                    "  containers: [{name: c, image: nginx, resources: {requests: {cpu: '1', memory: 2Gi}}}]\n")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: savings-plan}\nspec:\n"
                       "  requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.2xlarge]}\n"
                       "    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
                       "  price: '0.0042'\n")
    data = _plan_json(capsys, EXAMPLES / "default.yaml", pods, overlay)
    [c] = data["nodeClaims"]
    assert (c["instanceType"], c["capacityType"], c["pricePerHour"]) == ("m6i.2xlarge", "on-demand", 0.0042)
    assert c["priceOverlay"] == "savings-plan" and c["basePricePerHour"] > 0.3
    assert main(["plan", "-f", str(EXAMPLES / "default.yaml"), "-f", str(pods), "-f", str(overlay)]) == 0
    assert "price set by NodeOverlay savings-plan" in capsys.readouterr().out


def test_plan_refuses_what_validate_refuses_with_line_numbers(tmp_path, capsys):
    """Issue 31: plan checks workloads as validate does (OpenAPI schema, quantities), in validate's words."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n"
                   "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
                   "    spec:\n      afinity: {}\n      containers: [{name: c, image: nginx}]\n")
    assert main(["plan", "-f", str(EXAMPLES / "default.yaml"), "-f", str(bad)]) == 1
    err = capsys.readouterr().err
    assert 'spec.template.spec.afinity: unknown field "afinity"' in err and "(line 10)" in err
    assert main(["plan", "-f", str(EXAMPLES / "default.yaml"), "--kubernetes-version", "0.1"]) == 2
    assert "--kubernetes-version" in capsys.readouterr().err


def test_plan_takes_files_as_arguments_as_validate_and_simulate_do(capsys):
    """``plan FILE...`` (as ``validate`` and ``simulate``) is the same plan as ``plan -f FILE ...``; both forms mix;
    no file at all is a usage error naming the two forms."""
    with_f = _plan_json(capsys, EXAMPLES / "default.yaml", EXAMPLES / "workloads" / "web.yaml")
    assert main(["plan", "--json", str(EXAMPLES / "default.yaml"), str(EXAMPLES / "workloads" / "web.yaml")]) == 0
    positional = json.loads(capsys.readouterr().out)
    assert main(["plan", "--json", "-f", str(EXAMPLES / "default.yaml"), str(EXAMPLES / "workloads" / "web.yaml")]) == 0
    mixed = json.loads(capsys.readouterr().out)
    summary = [(c["nodePool"], c["instanceType"], c["zone"], sorted(c["pods"])) for c in with_f["nodeClaims"]]
    assert summary and all([(c["nodePool"], c["instanceType"], c["zone"], sorted(c["pods"])) for c in p["nodeClaims"]]
                           == summary for p in (positional, mixed))
    assert main(["plan"]) == 2
    assert "no manifest given: pass files or directories (plan FILE... or plan -f FILE ...)" in capsys.readouterr().err
