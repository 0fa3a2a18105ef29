"""A small declarative schema walker: types, enums, patterns, bounds, defaults, unknown fields.

A schema is a tree of nodes (:class:`Obj`, :class:`Str`, :class:`Int`, ...).
``node.walk(value, path, errors)`` returns a NEW value with CRD defaults filled
in and appends a :class:`FieldError` for every problem found (it never stops at
the first).  Cross-field rules (CEL ``x-kubernetes-validations`` in Karpenter's
CRDs) are plain functions attached to an :class:`Obj` or :class:`List` with
``checks=[...]``; they run on the defaulted value after its children.

``None`` (YAML ``key:`` with no value) is treated like an omitted field, as the
Kubernetes API server does for non-nullable fields: defaults still apply.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any, Callable, Iterable

from .errors import FieldError

MISSING: Any = object()

Check = Callable[[Any, str, list], None]


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    return f"{path}[{k}]"


def describe(value: Any) -> str:
    """A short, human description of a value's type for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def quote_list(items: Iterable[str]) -> str:
    return ", ".join(str(i) for i in items)


class Node:
    """Base node. ``default`` is applied by the parent :class:`Obj` when the field is absent."""

    def __init__(self, default: Any = MISSING, checks: Iterable[Check] = (), doc: str = ""):
        self.default = default
        self.checks = list(checks)
        self.doc = doc

    def walk(self, value: Any, path: str, errors: list[FieldError]) -> Any:
        out = self._walk(value, path, errors)
        if out is not _INVALID:
            for check in self.checks:
                check(out, path, errors)
            return out
        return value

    def _walk(self, value: Any, path: str, errors: list[FieldError]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


_INVALID: Any = object()


class AnyValue(Node):
    """Anything goes (kept as given, deep-copied)."""

    def _walk(self, value, path, errors):
        return copy.deepcopy(value)


class Str(Node):
    def __init__(
        self,
        *,
        enum: Iterable[str] | None = None,
        pattern: str | None = None,
        pattern_msg: str | None = None,
        max_len: int | None = None,
        min_len: int | None = None,
        not_empty: bool = False,
        **kw,
    ):
        super().__init__(**kw)
        self.enum = list(enum) if enum is not None else None
        self.pattern = re.compile(pattern) if pattern else None
        self.pattern_msg = pattern_msg
        self.max_len = max_len
        self.min_len = min_len
        self.not_empty = not_empty

    def _walk(self, value, path, errors):
        if not isinstance(value, str):
            hint = ""
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                # the number quoted, when that is valid; else what a valid value looks like (a duration needs its unit)
                text = str(value)
                if self.pattern is None or self.pattern.fullmatch(text):
                    hint = f' (quote it in YAML, e.g. "{text}")'
                else:
                    hint = f" ({self.pattern_msg or 'must match the pattern ' + self.pattern.pattern}, quoted in YAML)"
            errors.append(FieldError(path, f"must be a string, got {describe(value)}{hint}"))
            return _INVALID
        if self.not_empty and value == "":
            errors.append(FieldError(path, "must not be empty"))
            return value
        if self.enum is not None and value not in self.enum:
            near = difflib.get_close_matches(value, self.enum, n=1)
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            errors.append(FieldError(path, f"unsupported value {value!r}: must be one of {quote_list(self.enum)}{hint}"))
            return value
        if self.min_len is not None and len(value) < self.min_len:
            errors.append(FieldError(path, f"must be at least {self.min_len} characters long"))
        if self.max_len is not None and len(value) > self.max_len:
            errors.append(FieldError(path, f"must be at most {self.max_len} characters long (got {len(value)})"))
        elif self.pattern is not None and not self.pattern.search(value):
            msg = self.pattern_msg or f"must match the pattern {self.pattern.pattern}"
            errors.append(FieldError(path, f"invalid value {value!r}: {msg}"))
        return value


class Int(Node):
    def __init__(self, *, minimum: int | None = None, maximum: int | None = None, **kw):
        super().__init__(**kw)
        self.minimum = minimum
        self.maximum = maximum

    def _walk(self, value, path, errors):
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(FieldError(path, f"must be an integer, got {describe(value)}"))
            return _INVALID
        if self.minimum is not None and value < self.minimum:
            errors.append(FieldError(path, _range_msg(value, self.minimum, self.maximum)))
        elif self.maximum is not None and value > self.maximum:
            errors.append(FieldError(path, _range_msg(value, self.minimum, self.maximum)))
        return value


def _range_msg(value, lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"{value} is out of range: must be between {lo} and {hi}"
    if lo is not None:
        return f"{value} is too small: must be at least {lo}"
    return f"{value} is too large: must be at most {hi}"


class Bool(Node):
    def _walk(self, value, path, errors):
        if not isinstance(value, bool):
            errors.append(FieldError(path, f"must be true or false, got {describe(value)}"))
            return _INVALID
        return value


class List(Node):
    def __init__(self, item: Node, *, min_items: int | None = None, max_items: int | None = None, **kw):
        super().__init__(**kw)
        self.item = item
        self.min_items = min_items
        self.max_items = max_items

    def _walk(self, value, path, errors):
        if not isinstance(value, list):
            errors.append(FieldError(path, f"must be a list, got {describe(value)}"))
            return _INVALID
        if self.min_items is not None and len(value) < self.min_items:
            errors.append(FieldError(path, f"must have at least {self.min_items} item{'s' if self.min_items != 1 else ''}, got {len(value)}"))
        if self.max_items is not None and len(value) > self.max_items:
            errors.append(FieldError(path, f"must have at most {self.max_items} items, got {len(value)}"))
        return [self.item.walk(v, index(path, i), errors) for i, v in enumerate(value)]


class Map(Node):
    """A mapping with free keys (``additionalProperties``); ``key_check(k) -> message|None`` validates keys."""

    def __init__(self, value: Node, *, key_check: Callable[[str], str | None] | None = None, max_props: int | None = None, **kw):
        super().__init__(**kw)
        self.value = value
        self.key_check = key_check
        self.max_props = max_props

    def _walk(self, value, path, errors):
        if not isinstance(value, dict):
            errors.append(FieldError(path, f"must be a mapping, got {describe(value)}"))
            return _INVALID
        if self.max_props is not None and len(value) > self.max_props:
            errors.append(FieldError(path, f"must have at most {self.max_props} entries, got {len(value)}"))
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(FieldError(key(path, str(k)), f"keys must be strings, got {describe(k)}"))
                continue
            if self.key_check is not None:
                problem = self.key_check(k)
                if problem:
                    errors.append(FieldError(key(path, k), problem))
            out[k] = self.value.walk(v, key(path, k), errors)
        return out


class Obj(Node):
    """A mapping with known fields; unknown fields are errors (with a did-you-mean hint).

    ``unknown_message``: the message for an unknown field with no close known name (what the object's fields are
    measured against).  ``passthrough``: more fields, checked as ``fields`` are but listed apart: the ones another
    program reads (the kubelet's KubeletConfiguration beyond what Karpenter interprets, ``api/kubelet_config.py``)."""

    def __init__(self, fields: dict[str, Node], *, required: Iterable[str] | dict[str, str] = (),
                 unknown_message: str | None = None, passthrough: dict[str, Node] | None = None, **kw):
        super().__init__(**kw)
        self.fields = fields
        # a dict maps a required field to extra words for its "Required value" message
        self.required = dict(required) if isinstance(required, dict) else {name: "" for name in required}
        self.unknown_message = unknown_message
        self.passthrough = passthrough or {}

    def _walk(self, value, path, errors):
        if not isinstance(value, dict):
            errors.append(FieldError(path, f"must be a mapping, got {describe(value)}"))
            return _INVALID
        out: dict = {}
        for k, v in value.items():
            if not isinstance(k, str):
                errors.append(FieldError(join(path, str(k)), f"field names must be strings, got {describe(k)}"))
                continue
            node = self.fields.get(k) or self.passthrough.get(k)
            if node is None:
                near = difflib.get_close_matches(k, list(self.fields) + list(self.passthrough), n=1, cutoff=0.75)
                hint = f' (did you mean "{near[0]}"?)' if near else ""
                message = self.unknown_message if self.unknown_message and not near else f"unknown field{hint}"
                errors.append(FieldError(join(path, k), message))
                continue
            if v is None:
                continue  # null == omitted
            out[k] = node.walk(v, join(path, k), errors)
        for name, node in self.fields.items():
            if name in out:
                continue
            if node.default is not MISSING:
                out[name] = node.walk(copy.deepcopy(node.default), join(path, name), errors)
            elif name in self.required:
                extra = self.required[name]
                errors.append(FieldError(join(path, name), f"Required value: {extra}" if extra else "Required value"))
        return out


class OneOf(Node):
    """A value accepted by a custom parser: ``parse(value) -> message|None``; types listed for the message."""

    def __init__(self, parse: Callable[[Any], str | None], **kw):
        super().__init__(**kw)
        self.parse = parse

    def _walk(self, value, path, errors):
        problem = self.parse(value)
        if problem:
            errors.append(FieldError(path, problem))
            return _INVALID
        return copy.deepcopy(value)


#: the start of every refusal message (docs/api.md's field table and tests/api/test_field_table.py read it)
NOT_SUPPORTED = "not supported by karpenter-lambda"


class Refused(Node):
    """A field of Karpenter's API that karpenter-lambda does not implement: any value given is refused with
    "not supported by karpenter-lambda (<reason>)", never taken silently nor called an unknown field (a typo)."""

    def __init__(self, reason: str = "", **kw):
        super().__init__(**kw)
        self.reason = reason

    @property
    def message(self) -> str:
        return f"{NOT_SUPPORTED} ({self.reason})" if self.reason else NOT_SUPPORTED

    def _walk(self, value, path, errors):
        errors.append(FieldError(path, self.message))
        return _INVALID
