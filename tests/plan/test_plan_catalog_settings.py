"""``plan`` and ``simulate`` compute allocatable as the deployed functions do: with
``KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT`` / ``KARPENTER_LAMBDA_RESERVED_ENIS``, or the
``--vm-memory-overhead-percent`` / ``--reserved-enis`` flags, which win; a bad value is exit 2 naming it."""

from __future__ import annotations

import json

import pytest

import manifests as shared
from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.world import make_pod

VM = "KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT"
ENIS = "KARPENTER_LAMBDA_RESERVED_ENIS"
# m5.large only, on-demand (8192 MiB: 6903 MiB allocatable at 0.075, 7108 MiB at 0.05; 29 pods, 20 with 1 ENI reserved)
POOL = shared.pair(requirements=[shared.requirement("node.kubernetes.io/instance-type", ["m5.large"]),
                                 shared.requirement(shared.CAPACITY_TYPE, ["on-demand"])])


@pytest.fixture(autouse=True)
def _no_shell_settings(monkeypatch):
    monkeypatch.delenv(VM, raising=False)
    monkeypatch.delenv(ENIS, raising=False)


@pytest.fixture
def big(tmp_path):
    """The NodePool and one pod of 7000Mi: it fits m5.large only with the smaller overhead."""
    (tmp_path / "pool.yaml").write_text(POOL)
    (tmp_path / "pod.yaml").write_text(shared.to_yaml(make_pod("big-0", cpu="1", memory="7000Mi", tolerate=False)))
    return [str(tmp_path / "pool.yaml"), str(tmp_path / "pod.yaml")]


@pytest.fixture
def many(tmp_path):
    """The NodePool and 25 small pods: one m5.large holds them (29 pods), not with an ENI reserved (20)."""
    (tmp_path / "pool.yaml").write_text(POOL)
    (tmp_path / "pods.yaml").write_text(shared.to_yaml(*(make_pod(f"small-{i}", cpu="10m", memory="64Mi", tolerate=False)
                                                         for i in range(25))))
    return [str(tmp_path / "pool.yaml"), str(tmp_path / "pods.yaml")]


def _plan(capsys, files, *flags):
    code = main(["plan", "--json", *flags, *files])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


def test_the_overhead_variable_changes_what_fits(capsys, monkeypatch, big):
    code, out, _ = _plan(capsys, big)
    assert code == 3 and [u["pod"] for u in out["unschedulable"]] == ["default/big-0"]
    monkeypatch.setenv(VM, "0.05")
    code, out, _ = _plan(capsys, big)
    assert code == 0 and out["unschedulable"] == []
    assert [(c["instanceType"], c["pods"]) for c in out["nodeClaims"]] == [("m5.large", ["default/big-0"])]


def test_the_flag_wins_over_the_variable(capsys, monkeypatch, big):
    assert _plan(capsys, big, "--vm-memory-overhead-percent", "0.05")[0] == 0
    monkeypatch.setenv(VM, "0.05")
    assert _plan(capsys, big, "--vm-memory-overhead-percent", "0.075")[0] == 3


def test_reserved_enis_lower_the_pods_per_node(capsys, monkeypatch, many):
    code, out, _ = _plan(capsys, many)
    assert code == 0 and len(out["nodeClaims"]) == 1
    code, out, _ = _plan(capsys, many, "--reserved-enis", "1")
    assert code == 0 and sorted(len(c["pods"]) for c in out["nodeClaims"]) == [5, 20]
    monkeypatch.setenv(ENIS, "1")
    assert len(_plan(capsys, many)[1]["nodeClaims"]) == 2


def test_the_human_output_says_which_settings_it_used(capsys, big):
    main(["plan", "--vm-memory-overhead-percent", "0.05", "--reserved-enis", "1", *big])
    assert "with VM memory overhead 0.05, 1 reserved ENI" in capsys.readouterr().err


@pytest.mark.parametrize("env, flags, named", [
    ({VM: "7.5"}, [], f"environment variable {VM} must be a fraction of the instance memory such as 0.075 (7.5%)"),
    ({VM: "-0.1"}, [], f"environment variable {VM} must be a fraction"),
    ({ENIS: "-1"}, [], f"environment variable {ENIS} must be a whole number of network interfaces, 0 or more, not '-1'"),
    ({ENIS: "one"}, [], f"environment variable {ENIS} must be a whole number"),
    ({}, ["--vm-memory-overhead-percent", "abc"], "--vm-memory-overhead-percent must be a fraction"),
    ({VM: "bad"}, ["--vm-memory-overhead-percent", "1.5"], "--vm-memory-overhead-percent must be a fraction"),
    ({}, ["--reserved-enis", "-3"], "--reserved-enis must be a whole number"),
])
def test_bad_values_are_exit_2_naming_the_setting(capsys, monkeypatch, big, env, flags, named):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code, out, err = _plan(capsys, big, *flags)
    assert code == 2 and out is None
    assert err.startswith("error: ") and named in err, err


def test_simulate_refuses_a_bad_value_before_running(capsys, monkeypatch, big):
    monkeypatch.setenv(ENIS, "-1")
    assert main(["simulate", "--quiet", *big]) == 2
    assert f"environment variable {ENIS} must be a whole number" in capsys.readouterr().err


def test_simulate_runs_the_functions_and_kubelets_with_the_setting(capsys, monkeypatch, big, tmp_path):
    """simulate scrubs the shell's KARPENTER_LAMBDA_* from the run (sim/environment.py): it reads the settings first
    (the variable, and the flag) and hands them to the functions; the pod then launches and binds on the m5.large it
    fits only at 0.05.  ``--save-state`` keeps them, and ``--state DIR`` gives them to the commands again."""
    monkeypatch.setenv(VM, "0.05")
    saved = tmp_path / "saved"
    code = main(["simulate", "--json", "--quiet", "--until", "5m", "--reserved-enis", "1", "--save-state", str(saved),
                 *big])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out["unschedulable"]
    assert [(c["instanceType"], c["pods"], bool(c["nodeName"])) for c in out["nodeClaims"]] == [
        ("m5.large", ["default/big-0"], True)]
    assert json.loads((saved / "state.json").read_text())["functionEnv"] == {VM: "0.05", ENIS: "1"}
    kube = json.loads((saved / "kube.json").read_text())
    assert [n["status"]["capacity"]["pods"] for n in kube["nodes"]] == ["20"]   # the launch template's max pods

    from karpenter_lambda.controllers import runtime
    from karpenter_lambda.sim.state_io import serve_state

    monkeypatch.delenv(VM)
    with serve_state(saved):
        config = runtime.Config.from_env()
        assert (config.vm_memory_overhead_percent, config.reserved_enis) == (0.05, 1)


POLICY = "KARPENTER_LAMBDA_MIN_VALUES_POLICY"
# three families asked for at least, c5.large and c6a.large the only ones holding the pod: two values left
MIN3 = shared.pair(requirements=[shared.requirement("node.kubernetes.io/instance-type",
                                                    ["c5.large", "c6a.large", "t3.nano"]),
                                 dict(shared.requirement("karpenter.k8s.aws/instance-family", ["c5", "c6a", "t3"]),
                                      minValues=3),
                                 shared.requirement(shared.CAPACITY_TYPE, ["on-demand"])])


def test_plan_and_simulate_take_the_min_values_policy_from_the_shell(capsys, monkeypatch, tmp_path):
    (tmp_path / "pool.yaml").write_text(MIN3)
    (tmp_path / "pod.yaml").write_text(shared.to_yaml(make_pod("app-0", cpu="1", memory="1Gi", tolerate=False)))
    files = [str(tmp_path / "pool.yaml"), str(tmp_path / "pod.yaml")]
    monkeypatch.delenv(POLICY, raising=False)
    code, out, _ = _plan(capsys, files)
    assert code == 3 and "minValues 3" in out["unschedulable"][0]["reason"]          # Strict, the default
    monkeypatch.setenv(POLICY, "BestEffort")
    code, out, _ = _plan(capsys, files)
    assert code == 0 and [c["minValuesRelaxed"] for c in out["nodeClaims"]] == [True]
    code = main(["simulate", "--json", "--quiet", "--until", "3m", *files])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["pods"] == {"total": 1, "bound": 1}
    monkeypatch.setenv(POLICY, "Lenient")
    code, _, err = _plan(capsys, files)
    assert code == 2 and f"environment variable {POLICY} must be one of Strict, BestEffort, not 'Lenient'" in err
    assert main(["simulate", "--quiet", *files]) == 2
    assert f"environment variable {POLICY} must be one of" in capsys.readouterr().err
