"""`karpenter-lambda validate FILE...`: check Karpenter manifests offline.

Exit 0 when every object is valid, 1 when any issue is found, 2 on usage errors
(no such file).  Each issue goes to stderr as
``FILE:DOC_INDEX: Kind/name: field.path: message`` followed by a summary line;
``--json`` prints one JSON document on stdout instead:
``{"valid": bool, "objects": [{"kind", "name", "file"}], "errors": [issue.to_dict(), ...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..api.manifests import LoadResult, load_files, load_text


class InputError(Exception):
    """A file argument that cannot be used at all (missing): a usage error, exit 2."""


def load_inputs(paths: list[str], allow_other_kinds: bool = False) -> tuple[LoadResult, list[str]]:
    """Load every FILE (a file, a directory of *.yaml/*.yml/*.json, or ``-`` for stdin).

    Returns the load result and, per object in order, the file it came from.
    Raises :class:`InputError` naming every missing path.
    """
    missing = [p for p in paths if p != "-" and not Path(p).exists()]
    if missing:
        raise InputError("; ".join(f"{p}: no such file or directory" for p in missing))
    result = LoadResult()
    files: list[str] = []
    for p in paths:
        if p == "-":
            sub = load_text(sys.stdin.read(), "<stdin>", allow_other_kinds)
            names = ["<stdin>"] * len(sub.objects)
        elif Path(p).is_dir():
            sub, names = LoadResult(), []
            for f in sorted(x for x in Path(p).iterdir() if x.suffix in (".yaml", ".yml", ".json")):
                one = load_files([f], allow_other_kinds)
                sub.extend(one)
                names += [str(f)] * len(one.objects)
        else:
            sub = load_files([p], allow_other_kinds)
            names = [p] * len(sub.objects)
        result.extend(sub)
        files += names
    return result, files


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(result: LoadResult, files: list[str]) -> str:
    """One line: ``valid: 3 objects in 2 files`` or ``invalid: 4 errors in 1 file (2 valid objects)``."""
    if result.issues:
        bad_files = len({i.file for i in result.issues})
        return (f"invalid: {_plural(len(result.issues), 'error')} in {_plural(bad_files, 'file')} "
                f"({_plural(len(result.objects), 'valid object')})")
    line = f"valid: {_plural(len(result.objects), 'object')} in {_plural(len(set(files)), 'file')}"
    if result.skipped:
        line += f" ({len(result.skipped)} skipped: another provider's node class)"
    return line


def run(args: argparse.Namespace) -> int:
    try:
        result, files = load_inputs(args.files)
    except InputError as e:
        sys.stderr.write(f"validate: {e}\n")
        return 2
    if args.json:
        doc = {
            "valid": result.ok,
            "objects": [{"kind": o.kind, "name": o.name, "file": f} for o, f in zip(result.objects, files)],
            "errors": [i.to_dict() for i in result.issues],
            "skipped": [i.to_dict() for i in result.skipped],
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0 if result.ok else 1
    for issue in result.skipped + result.issues:
        sys.stderr.write(f"{issue}\n")
    line = summary(result, files)
    (sys.stdout if result.ok else sys.stderr).write(line + "\n")
    return 0 if result.ok else 1


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate", help="validate NodePool / EC2NodeClass / NodeClaim / OffPeakSchedule manifests (offline)",
        description="Validate Karpenter v1 manifests with Karpenter's CRD rules. Exit 0 valid, 1 invalid, 2 usage.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="YAML/JSON file (multi-document), a directory, or - for stdin")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout instead of text on stderr")
    p.set_defaults(func=run)
