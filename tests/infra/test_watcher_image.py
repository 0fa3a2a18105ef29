"""The watcher image: built from watcher/ by `cdk deploy` (a DockerImageAsset; synth needs no Docker), its build
context, the stack's image output, and `make synth` (cdk.out + warnings on the console)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

CLUSTER = "demo-cluster"  # the clusterName of the session synth (tests/infra/conftest.py)
REPO = Path(__file__).resolve().parents[2]

WATCHER = REPO / "watcher"
CONTEXT_FILES = {"Dockerfile", ".dockerignore", "requirements.txt", "karpenter_lambda_watcher/__init__.py",
                 "karpenter_lambda_watcher/__main__.py", "karpenter_lambda_watcher/watcher.py",
                 # the modules watcher.py was split into (issue 22)
                 "karpenter_lambda_watcher/handlers.py", "karpenter_lambda_watcher/messages.py",
                 "karpenter_lambda_watcher/reflector.py", "karpenter_lambda_watcher/sender.py",
                 "karpenter_lambda_watcher/stats.py",
                 # its own API client (the official one is not imported in a pod)
                 "karpenter_lambda_watcher/kubeclient.py"}


def _docker_assets(outdir: Path, stack: str) -> dict:
    return json.loads((outdir / f"{stack}.assets.json").read_text()).get("dockerImages", {})


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_stack_builds_the_watcher_image_and_outputs_its_uri(synth):
    """One Docker image asset, context watcher/ (only the Dockerfile, requirements and the package), pushed to the
    bootstrap repository by `cdk deploy`; WatcherImageUri names that image by its content hash."""
    images = _docker_assets(synth.outdir, f"KarpenterLambda-{CLUSTER}")
    assert len(images) == 1
    (digest, image), = images.items()
    assert image["source"]["platform"] == "linux/amd64"
    assert _files(synth.outdir / image["source"]["directory"]) == CONTEXT_FILES
    (dest,) = image["destinations"].values()
    assert dest["repositoryName"] == "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}"
    uri = synth.template["Outputs"]["WatcherImageUri"]["Value"]
    assert uri == {"Fn::Sub": "${AWS::AccountId}.dkr.ecr.${AWS::Region}.${AWS::URLSuffix}/"
                              f"cdk-hnb659fds-container-assets-${{AWS::AccountId}}-${{AWS::Region}}:{digest}"}


def test_pod_identity_association_matches_the_rendered_manifests(synth):
    from karpenter_lambda.cli.watcher import load_templates, render
    from karpenter_lambda.resources import watcher_manifests_dir

    (assoc,) = synth.of_type("AWS::EKS::PodIdentityAssociation").values()
    docs = render(load_templates(watcher_manifests_dir()), image="r.example.com/w:1", cluster=CLUSTER, region="us-east-1",
                  pod_queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/q")
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert (assoc["Properties"]["Namespace"], assoc["Properties"]["ServiceAccount"]) == \
        (dep["metadata"]["namespace"], pod["serviceAccountName"])
    outputs = synth.template["Outputs"]
    assert (outputs["WatcherNamespace"]["Value"], outputs["WatcherServiceAccount"]["Value"]) == \
        (dep["metadata"]["namespace"], pod["serviceAccountName"])


def test_dockerignore_keeps_tests_and_caches_out_of_the_context(tmp_path):
    """The same ignore rules CDK applies when it fingerprints and stages the context (and Docker when it builds)."""
    import aws_cdk as cdk
    from aws_cdk import aws_ecr_assets as ecr_assets

    ctx = tmp_path / "watcher"
    shutil.copytree(WATCHER, ctx, ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "karpenter_lambda_watcher" / "__pycache__").mkdir()
    (ctx / "karpenter_lambda_watcher" / "__pycache__" / "watcher.cpython-312.pyc").write_bytes(b"x")
    (ctx / "karpenter_lambda_watcher" / "stale.pyc").write_bytes(b"x")
    (ctx / "tests").mkdir()
    (ctx / "tests" / "test_watcher.py").write_text("")
    (ctx / ".pytest_cache").mkdir()
    (ctx / ".pytest_cache" / "README.md").write_text("")
    (ctx / "notes.md").write_text("")
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "S")
    ecr_assets.DockerImageAsset(stack, "Image", directory=str(ctx))
    app.synth()
    (image,) = _docker_assets(tmp_path / "out", "S").values()
    assert _files(tmp_path / "out" / image["source"]["directory"]) == CONTEXT_FILES


def test_dockerfile_copies_only_what_the_context_has_and_runs_non_root():
    text = (WATCHER / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    copies = [line.split()[1:-1] for line in lines if line.startswith("COPY") and "--from=" not in line]
    sources = [s for c in copies for s in c]
    assert sources == ["requirements.txt", "karpenter_lambda_watcher"]
    for s in sources:
        assert (WATCHER / s).exists(), s
        assert any(f == s or f.startswith(s + "/") for f in CONTEXT_FILES), f"{s} is excluded by .dockerignore"
    assert all(re.match(r"FROM python:3\.\d+-slim( AS \w+)?$", line) for line in lines if line.startswith("FROM"))
    assert "--no-cache-dir" in text
    user = [line for line in lines if line.startswith("USER")]
    assert user and user[-1].split()[1].split(":")[0] not in ("0", "root")
    # the Deployment's securityContext runs as the image's user
    dep = next(d for f in sorted((WATCHER / "manifests").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
               if d and d["kind"] == "Deployment")
    assert str(dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"]) == user[-1].split()[1].split(":")[0]
    entry = json.loads(next(line for line in lines if line.startswith("ENTRYPOINT"))[len("ENTRYPOINT"):])
    assert entry == ["python", "-m", "karpenter_lambda_watcher"]
    assert (WATCHER / "karpenter_lambda_watcher" / "__main__.py").exists()


def test_requirements_are_pinned_to_the_tested_versions():
    reqs = [line.strip() for line in (WATCHER / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert {r.split("==")[0] for r in reqs} == {"boto3"}   # the official kubernetes client is not needed in a pod
    for r in reqs:
        name, _, version = r.partition("==")
        assert re.fullmatch(r"\d+(\.\d+)+", version), f"{r}: not pinned with =="
        assert metadata.version(name) == version, f"{r}: the tests run with {metadata.version(name)}"


def test_watcher_image_and_platform_parameters(synth_factory, tmp_path):
    """-c watcherImage=URI: no asset (no Docker at deploy), the output is that image; watcherPlatform is checked."""
    from infra.config import ConfigError, load_config

    assert load_config({"clusterName": "c", "watcherPlatform": "linux/arm64"}).watcher_platform == "linux/arm64"
    with pytest.raises(ConfigError, match=r"watcherPlatform: 'windows/amd64' is not one of linux/amd64, linux/arm64"):
        load_config({"clusterName": "c", "watcherPlatform": "windows/amd64"})
    with pytest.raises(ConfigError, match=r"watcherImage: 'my image' is not a container image reference"):
        load_config({"clusterName": "c", "watcherImage": "my image"})

    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/karpenter-lambda-watcher:1.0"
    s = synth_factory({"clusterName": "own-image", "watcherImage": image}, tmp_path / "out")
    assert _docker_assets(tmp_path / "out", "KarpenterLambda-own-image") == {}
    assert s.template["Outputs"]["WatcherImageUri"]["Value"] == image


BAD_ROLE = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def test_make_synth_writes_cdk_out_and_prints_warnings(tmp_path):
    """`make synth` in a copy of the project (app.py, Makefile; the rest linked): the template lands in its cdk.out
    (app.py alone used to write a temporary directory) and the node-role warning is printed on the console."""
    work = tmp_path / "project"
    work.mkdir()
    for name in ("app.py", "Makefile", "cdk.json"):
        shutil.copy(REPO / name, work / name)
    for name in ("infra", "layers", "functions", "watcher", ".venv", "requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        (work / name).symlink_to(REPO / name)
    nodepools = tmp_path / "nodepools"
    nodepools.mkdir()
    (nodepools / "nc.yaml").write_text(BAD_ROLE)
    context = json.dumps({"clusterName": "demo", "nodePools": str(nodepools), "aws:cdk:bundling-stacks": []})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CDK_", "PYTEST"))}
    r = subprocess.run(["make", "-o", ".venv/.installed", "synth", f"SYNTH_CONTEXT={context}",
                        f"PY={sys.executable}"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    template = json.loads((work / "cdk.out" / "KarpenterLambda-demo.template.json").read_text())
    assert "WatcherImageUri" in template["Outputs"]
    assert ("[Warning at /KarpenterLambda-demo/NodePools] " + str(nodepools / "nc.yaml") + ":0: EC2NodeClass/default: "
            "spec.role: 'KarpenterNodeRole-demo' is not this stack's node role") in r.stderr, r.stderr[-3000:]
    assert f"synthesized to {work / 'cdk.out'}" in r.stderr


def test_app_leaves_messages_to_the_cdk_cli():
    sys.path.insert(0, str(REPO))
    import app

    assert app.run_by_cdk_cli({"CDK_CLI_VERSION": "2.1000.0"}) and not app.run_by_cdk_cli({})
    assert app.outdir_for({"CDK_OUTDIR": "/tmp/x"}) is None          # the App reads CDK_OUTDIR itself
    assert app.outdir_for({}) == str(REPO / "cdk.out")


def test_app_prints_warnings_and_counts_errors(tmp_path):
    """print_messages: every warning and error annotation of the assembly, one line each; errors make app.py exit 1."""
    import io

    import aws_cdk as cdk

    sys.path.insert(0, str(REPO))
    import app

    a = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(a, "S")
    cdk.Annotations.of(stack).add_warning_v2("t:w", "a warning")
    cdk.Annotations.of(stack).add_error("an error")
    cdk.Annotations.of(stack).add_info("an info")
    out = io.StringIO()
    assert app.print_messages(a.synth(), out) == 1
    assert out.getvalue().splitlines() == ["[Warning at /S] a warning [ack: t:w]", "[Error at /S] an error"]
