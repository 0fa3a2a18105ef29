"""Kubernetes objects checked against the OpenAPI schema of the cluster's version, strictly (pure).

The schemas are the published Kubernetes OpenAPI definitions as JSON Schema, strict variant (an unknown field is
an error, as ``kubectl apply --validate=strict`` and the API server's field validation make it), shipped by the
maintained ``kubernetes-validate`` package for every minor version from 1.25 on: the newest of its versions that is
not newer than the cluster's is used.  Only its bundled data files are read (no network); jsonschema reports every
error, not only the first, each as a :class:`FieldError` whose path is dotted with ``[i]`` list indexes (a map key
holding dots or slashes in brackets: ``labels[app.kubernetes.io/name]``), the form the loader finds lines for.

What the schema cannot say (quantity grammar, enum values the published schemas leave open, PDB exclusivity) is
in :mod:`.kuberules`; :func:`kube_errors` runs both.  ``kubernetes-validate`` is a dependency of the CLI (not of the
Lambda layer, whose functions never read manifests): without it, :func:`kube_errors` returns no error and
:func:`available` is False.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from typing import Iterator

from .errors import FieldError

#: The Kubernetes version the CLI checks against when none is given: the simulated cluster's (the simulator's
#: local API server and EKS AMIs are of this version).
KUBERNETES_VERSION = "1.31"

_SCHEMA_DIR = "kubernetes-json-schema"


def available() -> bool:
    """Whether the schema package is installed (the CLI's dependency ``kubernetes-validate``)."""
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        return False
    return True


def _minor(version: str) -> tuple[int, int]:
    m = re.match(r"^v?(\d+)\.(\d+)", version.strip())
    if not m:
        raise ValueError(f"not a Kubernetes version: {version!r} (expected MAJOR.MINOR, e.g. 1.31)")
    return int(m.group(1)), int(m.group(2))


@functools.lru_cache(maxsize=None)
def schema_versions() -> tuple[str, ...]:
    """The Kubernetes versions the schema package has schemas for, oldest first (``("1.25.0", ...)``)."""
    from kubernetes_validate.utils import all_versions

    return tuple(all_versions())


def schema_version(version: str) -> str:
    """The schemas used for cluster ``version``: the newest not newer than it; the newest of all for a newer cluster
    (its API only adds fields); ValueError for one older than every schema (or not a version)."""
    want = _minor(version)
    known = schema_versions()
    fitting = [v for v in known if _minor(v) <= want]
    if fitting:
        return fitting[-1]
    if known and want > _minor(known[-1]):
        return known[-1]
    raise ValueError(f"Kubernetes {version} is older than every schema known ({known[0] if known else 'none'} and later)")


def _read(version: str, name: str):
    from kubernetes_validate.utils import schema_contents

    try:
        return schema_contents(f"{_SCHEMA_DIR}/v{version}-local-strict/{name}", version)
    except FileNotFoundError:
        return None


def _file_name(kind: str, api_version: str) -> str:
    """``apps/v1`` Deployment -> ``deployment-apps-v1.json`` (a group's domain dropped: ``policy/v1``, ``storage.k8s.io/v1``)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@functools.lru_cache(maxsize=None)
def _registry(version: str):
    from referencing import Registry, Resource

    return Resource.from_contents(_read(version, "_definitions.json")) @ Registry()


@functools.lru_cache(maxsize=None)
def _validator(version: str, kind: str, api_version: str):
    """The validator of one kind/apiVersion, or None when Kubernetes has no such type."""
    import jsonschema

    schema = _read(version, _file_name(kind, api_version))
    if schema is None:
        return None
    return jsonschema.Draft202012Validator(schema, registry=_registry(version))


@functools.lru_cache(maxsize=None)
def _kinds(version: str) -> dict[str, tuple[str, ...]]:
    """Kind (lower case) -> the apiVersions the schemas know it in (for "expected apps/v1" hints)."""
    defs = (_read(version, "_definitions.json") or {}).get("$defs", {})
    out: dict[str, list[str]] = {}
    for d in defs.values():
        for gvk in d.get("x-kubernetes-group-version-kind") or []:
            api = f"{gvk['group']}/{gvk['version']}" if gvk.get("group") else gvk["version"]
            out.setdefault(gvk["kind"].lower(), []).append(api)
    return {k: tuple(sorted(set(v))) for k, v in out.items()}


@functools.lru_cache(maxsize=8)
def builtin_kinds(version: str | None = None) -> dict[str, dict[str, tuple[str, ...]]]:
    """API group ("" for the core group) -> {kind: the versions serving it} of the built-in Kubernetes kinds of
    ``version`` (default: the simulated cluster's); {} when no schemas are installed."""
    try:
        if not available():
            return {}
        defs = (_read(schema_version(version or KUBERNETES_VERSION), "_definitions.json") or {}).get("$defs", {})
    except (ImportError, ValueError, OSError):   # no schema to tell: nothing is known built in
        return {}
    found: dict[str, dict[str, set]] = {}
    for d in defs.values():
        for gvk in d.get("x-kubernetes-group-version-kind") or ():
            found.setdefault(gvk.get("group") or "", {}).setdefault(gvk["kind"], set()).add(gvk["version"])
    return {g: {k: tuple(sorted(v)) for k, v in kinds.items()} for g, kinds in found.items()}


def known_kind(kind: str, version: str = KUBERNETES_VERSION) -> bool:
    """Whether ``kind`` is a built-in Kubernetes kind (in any API version) of the cluster's version."""
    return available() and kind.lower() in _kinds(schema_version(version))


def join_path(parts) -> str:
    """(``spec``, ``containers``, 0, ``name``) -> ``spec.containers[0].name``; a key with dots or slashes in brackets."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif re.search(r"[./\[\]]", p) or not p:
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    names = [t] if isinstance(t, str) else list(t or [])
    return [n for n in names if n != "null"]


def _describe(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return json.dumps(value) if isinstance(value, (int, float)) or value is None else repr(value)


_ARTICLE = {"object": "an object", "array": "a list", "integer": "an integer", "string": "a string",
            "number": "a number", "boolean": "a boolean (true or false)"}


def _messages(error) -> Iterator[FieldError]:
    """One jsonschema error as the API server would word it (possibly several: one per unknown field)."""
    path = list(error.absolute_path)
    kind = error.validator
    if kind == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties") or {})
        for key in sorted((k for k in error.instance if k not in known), key=str):
            key = key if isinstance(key, str) else json.dumps(key)
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            yield FieldError(join_path(path + [key]), f'unknown field "{key}"{hint}')
        return
    if kind == "required":
        m = re.match(r"^'([^']+)' is a required property", error.message)
        name = m.group(1) if m else ""
        yield FieldError(join_path(path + [name] if name else path), "Required value")
        return
    if kind == "type":
        want = " or ".join(_ARTICLE.get(t, t) for t in _types(error.schema))
        yield FieldError(join_path(path), f"Invalid value: {_describe(error.instance)}: must be {want}")
        return
    if kind in ("oneOf", "anyOf"):
        types = [t for s in error.schema.get(kind) or [] for t in _types(s)]
        want = " or ".join(_ARTICLE.get(t, t) for t in dict.fromkeys(types))
        yield FieldError(join_path(path), f"Invalid value: {_describe(error.instance)}: must be {want or 'valid'}")
        return
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in error.schema.get("enum") or [])
        yield FieldError(join_path(path), f"Unsupported value: {_describe(error.instance)}: supported values: {allowed}")
        return
    yield FieldError(join_path(path), f"Invalid value: {error.message}")


def schema_errors(doc: dict, version: str = KUBERNETES_VERSION) -> list[FieldError]:
    """Every way ``doc`` (a built-in Kubernetes kind) breaks its OpenAPI schema in Kubernetes ``version``.

    A kind Kubernetes does not have (a custom resource: a Scenario, another CRD) has no schema: no error.  A
    built-in kind under an apiVersion the version does not serve (``apps/v1beta1`` Deployment) is one error."""
    if not available():
        return []
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return []
    used = schema_version(version)
    validator = _validator(used, kind, api_version)
    if validator is None:
        served = _kinds(used).get(kind.lower())
        if not served:
            return []
        return [FieldError("apiVersion", f"Unsupported value: {json.dumps(api_version)}: Kubernetes {version} serves "
                                         f"{kind} as {', '.join(served)}")]
    found = [(list(e.absolute_path), list(_messages(e))) for e in validator.iter_errors(doc)]
    defs = (_read(used, "_definitions.json") or {}).get("$defs", {})
    found += [(p, [FieldError(join_path(p), "Invalid value: null: must be an object")])
              for p in _null_items(doc, validator.schema, [], defs)]
    out: list[FieldError] = []
    for _, errors in sorted(found, key=lambda f: [(0, p) if isinstance(p, int) else (1, p) for p in f[0]]):
        out.extend(errors)
    return out


def _resolve(schema, defs: dict) -> dict:
    """``schema`` with its ``$ref`` (into the definitions) followed."""
    for _ in range(8):
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or "#/$defs/" not in ref:
            break
        schema = defs.get(ref.split("#/$defs/", 1)[1], {})
    return schema if isinstance(schema, dict) else {}


def _null_items(value, schema, path: list, defs: dict) -> Iterator[list]:
    """The paths of null items in lists of objects (``containers:`` followed by a lone ``-``).  The schemas the package
    ships let every object be null, so jsonschema takes them; the API server decodes one as an empty object that
    its validation then refuses (``name: Required value``, ``containerPort: Required value``...), and kubectl's
    client-side validation refused it as ``got "null", expected "map"``: an error here, said once, at the item."""
    schema = _resolve(schema, defs)
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            child = props.get(key, extra if isinstance(extra, dict) else None)
            if child is not None and isinstance(sub, (dict, list)):
                yield from _null_items(sub, child, path + [key], defs)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = _resolve(schema["items"], defs)
        is_object = "object" in _types(items) or "properties" in items
        for i, item in enumerate(value):
            if item is None and is_object:
                yield path + [i]
            elif isinstance(item, (dict, list)):
                yield from _null_items(item, items, path + [i], defs)
