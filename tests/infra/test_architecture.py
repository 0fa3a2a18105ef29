"""Issue 32 item 3: every function and the core layer on arm64 (about 20% less per GB-second than x86_64), the layer
built from aarch64 wheels; the memory the cost report prices is the memory the stack deploys."""

import json
from pathlib import Path

from karpenter_lambda.sim.functions import LAMBDA_ARCHITECTURE, load_functions

REPO = Path(__file__).resolve().parents[2]


def test_the_architecture_is_arm64_in_one_place():
    from aws_cdk import aws_lambda as lambda_

    from infra.layer import ARCHITECTURE, PLATFORM

    assert LAMBDA_ARCHITECTURE == "arm64"
    assert ARCHITECTURE.name == lambda_.Architecture.ARM_64.name
    assert PLATFORM == "manylinux2014_aarch64"


def test_the_layer_is_built_from_aarch64_wheels(tmp_path):
    from infra.layer import pip_command

    cmd = pip_command(tmp_path / "python", REPO / "requirements.txt")
    assert cmd[cmd.index("--platform") + 1] == "manylinux2014_aarch64"
    assert "--only-binary=:all:" in cmd and cmd[cmd.index("--python-version") + 1] == "3.14"


def test_every_registry_function_is_arm64_with_its_registry_memory(synth):
    registry = {f["description"]: f for f in json.loads((REPO / "functions" / "registry.json").read_text())["functions"]}
    deployed = {fn["Properties"].get("Description"): fn["Properties"]
                for fn in synth.of_type("AWS::Lambda::Function").values()}
    assert set(registry) <= set(deployed)
    sim_memory = {f.name: f.memory_mb for f in load_functions(REPO)}
    for description, f in registry.items():
        props = deployed[description]
        assert props["Architectures"] == ["arm64"], f["name"]
        assert props["MemorySize"] == f["memoryMb"] == sim_memory[f["name"]], f["name"]


def test_the_layer_is_compatible_with_arm64_only(synth):
    [layer] = synth.of_type("AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert "arm64" in layer["Properties"]["Description"]
