"""Every command that needs AWS exits 2 with one clear stderr line when no AWS credential can be found (docs/cli.md:
"2 usage or environment ... no credentials"), instead of a traceback or exit 1."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent

NODEPOOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""


def _env_without_credentials(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("KARPENTER_LAMBDA_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path)})
    return env


@pytest.mark.parametrize("argv", [
    ["disruption", "plan"],
    ["disruption", "plan", "--json"],
    ["offpeak", "status"],
    ["offpeak", "run", "--dry-run"],
    ["get", "nodepools"],
    ["delete", "nodepool", "x"],
    ["apply", "-f", "{manifest}"],
])
def test_missing_credentials_exit_2_with_one_line(tmp_path, argv):
    manifest = tmp_path / "np.yaml"
    manifest.write_text(NODEPOOL)
    argv = [a.replace("{manifest}", str(manifest)) for a in argv]
    proc = subprocess.run([str(VENV_BIN / "karpenter-lambda"), *argv], env=_env_without_credentials(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no AWS credentials" in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_loopback_endpoint_gets_dummy_credentials_for_every_client(monkeypatch):
    """docs/cli.md: with --endpoint-url on loopback (moto_server) and no credentials, any values work: every AWS client
    of the command gets them (``disruption plan`` and ``offpeak status`` said "no AWS credentials ... or use
    --endpoint-url" with --endpoint-url given, while ``get`` worked)."""
    from karpenter_lambda.cli.main import _local_endpoint_credentials

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    _local_endpoint_credentials("https://dynamodb.us-east-1.amazonaws.com")
    assert "AWS_ACCESS_KEY_ID" not in os.environ
    _local_endpoint_credentials("http://127.0.0.1:5000")
    assert (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]) == ("testing", "testing")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREAL")      # the user's own credentials are never replaced
    _local_endpoint_credentials("http://localhost:5000")
    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIAREAL"
