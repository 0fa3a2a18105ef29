"""The IAM role and Kubernetes identities one deployment (the CDK stack of one cluster) uses.

One definition for the stack (``infra/``), its synth check and ``karpenter-lambda validate``/``watcher manifest``:

* the node role ``KarpenterLambdaNode-<cluster>``: the only role the functions may pass to EC2 (``iam:PassRole``),
  so an EC2NodeClass whose ``spec.role`` names another role can never launch (:func:`node_role_warnings`);
* the watcher's namespace and service account, bound by the stack's EKS Pod Identity association.

Pure: no I/O; callers parse the files.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from .errors import ValidationIssue

STACK_NAME_PREFIX = "KarpenterLambda-"   # one CloudFormation stack per cluster: KarpenterLambda-<cluster>
# EKS cluster names: 1-100 characters, ^[0-9A-Za-z][A-Za-z0-9\-_]*$ (CreateCluster API)
CLUSTER_NAME_RE = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
# a container image reference: [registry[:port]/]repository[:tag][@sha256:digest], no whitespace
IMAGE_RE = re.compile(r"^[a-z0-9]([a-z0-9._:/-]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")

NODE_ROLE_PREFIX = "KarpenterLambdaNode-"
IAM_ROLE_NAME_MAX = 64

# the watcher's Kubernetes identity: watcher/manifests/ and the stack's Pod Identity association use these
WATCHER_NAMESPACE = "karpenter-lambda"
WATCHER_SERVICE_ACCOUNT = "karpenter-lambda-watcher"


def stack_name(cluster: str) -> str:
    return f"{STACK_NAME_PREFIX}{cluster}"


def node_role_name(cluster: str) -> str | None:
    """``KarpenterLambdaNode-<cluster>``: a fixed name so EC2NodeClass ``spec.role`` can be written before deploying
    (None, i.e. a generated name, when that exceeds IAM's 64 characters)."""
    name = f"{NODE_ROLE_PREFIX}{cluster}"
    return name if len(name) <= IAM_ROLE_NAME_MAX else None


def _doc(item: Any) -> dict | None:
    if isinstance(item, dict):
        return item
    to_dict = getattr(item, "to_dict", None)   # an api.objects.KubeObject
    return to_dict() if callable(to_dict) else None


def node_role_warnings(nodeclasses: Iterable[Any], cluster: str, *, node_role: str | None = None) -> list[ValidationIssue]:
    """EC2NodeClasses whose ``spec.role`` is not this deployment's node role, one issue each (path ``spec.role``).

    ``nodeclasses``: a ``manifests.LoadResult`` (each object reported at its file, document and the line of its
    ``spec.role``), ``(file, doc_index, doc)`` tuples, or bare documents (a mapping or a KubeObject; reported as
    ``<input>:0``); other kinds and classes without a string ``spec.role`` (e.g. ``spec.instanceProfile``) are
    ignored. ``node_role`` overrides ``node_role_name(cluster)``; with neither (a cluster name too long for the
    fixed name) nothing can be checked and the list is empty. A role ARN is compared by its last path segment.
    """
    role = node_role or node_role_name(cluster)
    if not role:
        return []
    lines: list[int] = []
    origins = getattr(nodeclasses, "origins", None)
    if origins is not None:   # a LoadResult: objects with their (file, doc_index) and lines
        objects = list(nodeclasses.objects)
        lines = [nodeclasses.line_of(i, "spec.role") for i in range(len(objects))]
        nodeclasses = [(*origins[i], o) if i < len(origins) else o for i, o in enumerate(objects)]
    issues = []
    for n, item in enumerate(nodeclasses):
        if isinstance(item, tuple) and len(item) == 3:
            file, index, doc = item[0], item[1], _doc(item[2])
        else:
            file, index, doc = "<input>", 0, _doc(item)
        if not isinstance(doc, dict) or doc.get("kind") != "EC2NodeClass" or not isinstance(doc.get("spec"), dict):
            continue
        spec_role = doc["spec"].get("role")
        if not isinstance(spec_role, str) or spec_role.rsplit("/", 1)[-1] == role:
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        issues.append(ValidationIssue(
            str(file), int(index), "EC2NodeClass", str(meta.get("name", "")), "spec.role",
            f"{spec_role!r} is not this stack's node role: the functions may only pass {role!r} to EC2 "
            f"(iam:PassRole), so nodes of this class could never launch; set spec.role: {role}",
            lines[n] if n < len(lines) else 0,
        ))
    return issues
