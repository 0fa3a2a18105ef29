"""`karpenter-lambda convert -f FILE [-f FILE...]`: print v1beta1 NodePools / EC2NodeClasses as v1 YAML.

Every document of the inputs is printed on stdout (multi-document YAML, in input order): v1beta1 NodePools and
EC2NodeClasses converted by Karpenter's v1 migration rules (:mod:`karpenter_lambda.api.convert`; a NodePool's
kubelet moved to its EC2NodeClass, which must be among the inputs), everything else as given.  One warning per
changed object goes to stderr (``FILE:DOC: Kind/name: warning: converted from ...``).  Nothing is printed on
stdout when a field cannot be converted or the result is not valid v1: the errors go to stderr, exit 1.
Exit 2 for a missing file.  The output validates with ``karpenter-lambda validate`` without a warning.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ..api.convert import convert_documents
from ..api.manifests import _decode, parse_documents
from .validate import MANIFEST_SUFFIXES, InputError, empty_inputs, format_issue, load_inputs, print_warnings, simulate_kinds


def _documents(paths: list[str]) -> list:
    docs: list = []
    for p in paths:
        if p == "-":
            texts = [sys.stdin.read()]
        else:
            path = Path(p)
            files = sorted(f for f in path.iterdir() if f.suffix in MANIFEST_SUFFIXES) if path.is_dir() else [path]
            texts = [_decode(f.read_bytes()) for f in files]
        for text in texts:
            parsed, _ = parse_documents(text)
            for _, data in parsed:
                if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
                    docs += data["items"]
                else:
                    docs.append(data)
    return docs


def run(args) -> int:
    paths = list(args.files or []) + list(args.more_files or [])
    if not paths:
        sys.stderr.write("karpenter-lambda convert: at least one -f FILE is required\n")
        return 2
    if paths.count("-") > 1:
        sys.stderr.write("karpenter-lambda convert: - (stdin) may be given once\n")
        return 2
    if "-" in paths:  # read once, used twice
        import io

        sys.stdin = io.StringIO(sys.stdin.read())
    try:
        result, _ = load_inputs(paths, accept_kinds=simulate_kinds())  # conversion + v1 validation, with lines
    except InputError as e:
        sys.stderr.write(f"karpenter-lambda convert: {e}\n")
        return 2
    result.issues.extend(empty_inputs(paths, result))
    print_warnings(result)
    if result.issues:
        for issue in result.issues:
            sys.stderr.write(format_issue(issue) + "\n")
        sys.stderr.write(f"convert: {len(result.issues)} error{'s' if len(result.issues) != 1 else ''}; nothing printed\n")
        return 1
    if "-" in paths:
        sys.stdin.seek(0)
    conversion = convert_documents(_documents(paths))
    sys.stdout.write(yaml.safe_dump_all(conversion.docs, sort_keys=False, default_flow_style=False))
    return 0


def register(sub) -> None:
    p = sub.add_parser("convert", help="print Karpenter v1beta1 NodePools / EC2NodeClasses as v1 YAML",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", metavar="FILE", help="YAML/JSON file (multi-document), a directory, or - for stdin")
    p.add_argument("-f", "--filename", dest="more_files", action="append", default=[], metavar="FILE",
                   help="a manifest file (repeatable; adds to the FILE arguments)")
    p.set_defaults(func=run)
