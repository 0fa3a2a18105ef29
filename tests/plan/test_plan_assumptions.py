"""`plan` tells what it assumed (issue 20, item 5): the zones (the simulator's by default, --zones to change them),
estimated spot prices marked as estimates, and what the PODS and OPTIONS columns mean."""

import json
from pathlib import Path

import yaml

from karpenter_lambda.catalog.zones import DEFAULT_ZONE_SUFFIXES, default_zones
from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.aws import SimAccount

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = ["-f", str(EXAMPLES / "default.yaml"), "-f", str(EXAMPLES / "workloads" / "web.yaml")]


def _run(capsys, *argv):
    code = main(["plan", *FILES, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _json(capsys, *argv):
    code, out, err = _run(capsys, "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def test_plan_assumes_the_simulators_zones(capsys):
    sim_zones = [f"us-east-1{z}" for z in SimAccount("c").zones]
    assert SimAccount("c").zones == DEFAULT_ZONE_SUFFIXES and sim_zones == default_zones("us-east-1")
    data = _json(capsys)
    assert data["zones"] == sim_zones == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert data["nodeClaims"] and {c["zone"] for c in data["nodeClaims"]} <= set(sim_zones)
    code, out, _ = _run(capsys)
    assert code == 0
    assert "zones: us-east-1a, us-east-1b, us-east-1c (the simulator's subnets; change with --zones)" in out


def test_plan_zones_flag(capsys):
    data = _json(capsys, "--zones", "us-east-1e,us-east-1f")
    assert data["zones"] == ["us-east-1e", "us-east-1f"]
    assert data["nodeClaims"] and {c["zone"] for c in data["nodeClaims"]} <= {"us-east-1e", "us-east-1f"}
    one = _json(capsys, "--zones", "us-east-1b")
    assert {c["zone"] for c in one["nodeClaims"]} == {"us-east-1b"}
    code, out, _ = _run(capsys, "--zones", "us-east-1b")
    assert code == 0 and "zones: us-east-1b (--zones)" in out


def test_plan_zones_flag_errors_name_the_flag(capsys):
    code, out, err = _run(capsys, "--json", "--zones", "us-west-2a")
    assert code == 2 and out == ""
    assert "--zones: 'us-west-2a' is not an availability zone of region us-east-1" in err
    code, out, err = _run(capsys, "--json", "--zones", "us-east-1a,us-east-1z")
    assert code == 2 and out == ""
    assert "--zones: no instance type is offered in us-east-1z" in err
    code, _, err = _run(capsys, "--zones", ",")
    assert code == 2 and "--zones: no zone given" in err


def test_plan_default_zones_skip_zones_without_offerings(capsys):
    """ap-northeast-1 has no 1b in moto's data: the default assumption keeps the zones that exist."""
    data = _json(capsys, "--region", "ap-northeast-1")
    assert data["zones"] == ["ap-northeast-1a", "ap-northeast-1c"]


def test_plan_marks_estimated_spot_prices(tmp_path, capsys):
    data = _json(capsys)
    spot = [c for c in data["nodeClaims"] if c["capacityType"] == "spot"]
    assert spot, "the example NodePool allows spot: offline, spot is cheapest"
    assert all(c["priceEstimated"] is True for c in spot)  # offline there is no spot price history
    assert data["costEstimated"] is True
    code, out, _ = _run(capsys)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("default-")}
    for c in spot:
        assert rows[c["name"]][5] == f"~${c['pricePerHour']:.4f}"
    assert "~: estimated spot price" in out

    # on-demand prices are real (the bundled price list): not marked
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "default.yaml").read_text()) if d]
    for d in docs:
        if d["kind"] == "NodePool":
            for r in d["spec"]["template"]["spec"]["requirements"]:
                if r["key"] == "karpenter.sh/capacity-type":
                    r["values"] = ["on-demand"]
    od_file = tmp_path / "od.yaml"
    od_file.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "--json", "-f", str(od_file), "-f", str(EXAMPLES / "workloads" / "web.yaml")])
    od = json.loads(capsys.readouterr().out)
    assert code == 0 and od["nodeClaims"]
    assert all(c["capacityType"] == "on-demand" and c["priceEstimated"] is False for c in od["nodeClaims"])
    assert od["costEstimated"] is False
    code = main(["plan", "-f", str(od_file), "-f", str(EXAMPLES / "workloads" / "web.yaml")])
    out = capsys.readouterr().out
    assert "~$" not in out and "~: estimated" not in out


def test_plan_table_pods_and_options_columns(capsys):
    data = _json(capsys)
    code, out, _ = _run(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NODECLAIM", "NODEPOOL", "INSTANCE-TYPE", "ZONE", "CAPACITY", "PRICE/H", "PODS", "OPTIONS"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.startswith("default-")}
    assert set(rows) == {c["name"] for c in data["nodeClaims"]}
    for c in data["nodeClaims"]:
        assert int(rows[c["name"]][6]) == len(c["pods"])  # PODS: the NodeClaim's pods
        assert int(rows[c["name"]][7]) == len(c["instanceTypes"])  # OPTIONS: its CreateFleet instance types
    assert sum(int(r[6]) for r in rows.values()) == 21  # every pending pod of web.yaml, none twice
    assert "OPTIONS: instance types the NodeClaim may launch as (CreateFleet overrides, cheapest first)" in out
    assert "PODS: pending pods placed on the NodeClaim" in out
