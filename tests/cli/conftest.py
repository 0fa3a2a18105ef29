import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from karpenter_lambda.cli.main import main

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: cli("get", "np") -> (exit code, stdout, stderr)."""

    def run(*argv: str):
        try:
            rc = main(list(argv))
        except SystemExit as e:  # argparse usage errors
            rc = e.code
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_server():
    """A real moto_server on 127.0.0.1 (a free port) for the whole session; yields its URL."""
    port = _free_port()
    exe = VENV_BIN / "moto_server"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(cmd + ["-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/data.json", timeout=1).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not start on {url}")
            time.sleep(0.1)
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def manifests(tmp_path):
    """Write YAML text to a file: manifests("name.yaml", text) -> path."""

    def write(name: str, text: str) -> str:
        p = tmp_path / name
        p.write_text(text)
        return str(p)

    return write
