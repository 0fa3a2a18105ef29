"""Issue 31: docs/offpeak.md names the watcher's namespace as watcher/manifests/ create it (a Fargate profile for a
namespace the manifests do not use would leave the watcher on a node a schedule drains)."""

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_offpeak_doc_names_the_watchers_namespace():
    namespaces = set()
    for f in sorted((REPO / "watcher" / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict):
                ns = (doc.get("metadata") or {}).get("namespace")
                namespaces |= {ns} if ns else set()
                namespaces |= {s.get("namespace") for s in doc.get("subjects") or [] if s.get("namespace")}
    assert len(namespaces) == 1, namespaces
    text = (REPO / "docs" / "offpeak.md").read_text()
    named = re.findall(r"Fargate profile for its namespace\s*\(`([^`]+)`", text)
    assert named == sorted(namespaces)
