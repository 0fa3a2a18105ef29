"""A faster moto for the embedded environment: moto's XML responses written without xmltodict's SAX machinery.

moto 5.2 turns every EC2 (and IAM, STS, ...) response into XML with ``xmltodict.unparse``, which walks the body
through a SAX ``XMLGenerator``: per element a name validation, an ``AttributesImpl``, several method calls. For a
DescribeInstances of twenty instances that was a third of the call (about 35 of 110 profiled ms). :func:`unparse`
writes the same text directly, following xmltodict 1.0's rules as moto calls it (``pretty=False``,
``short_empty_elements=True``): a dict is an element (``@name`` keys its attributes, ``#text`` its text, other keys
its children in order, an empty list no child), a list or other iterable repeats the element, ``None`` and ``""``
are ``<a/>``, booleans ``true``/``false``, other values ``str()``; text escaped as ``xml.sax.saxutils.escape``,
attributes as ``quoteattr``. Anything else (a comment key, bytes, an ``@xmlns`` map, a name xmltodict would refuse,
other arguments) is handed to xmltodict itself. ``tests/sim/test_speed_xml.py`` holds the two equal, byte for byte,
on every body a run of EC2 and IAM calls produced and on edge cases.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from karpenter_lambda.sim import moto_patch

_PROLOG = '<?xml version="1.0" encoding="utf-8"?>\n'
_BAD_NAME_CHARS = frozenset("<>/\"'=")
_good_names: set = set()


class _Unsupported(Exception):
    """A body this writer does not handle: xmltodict writes it."""


def _check_name(name: Any) -> str:
    if name in _good_names:
        return name
    if (not isinstance(name, str) or not name or name[0] in "?!@#" or _BAD_NAME_CHARS.intersection(name)
            or any(ch.isspace() for ch in name)):
        raise _Unsupported(name)
    if len(_good_names) < 10_000:
        _good_names.add(name)
    return name


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise _Unsupported("bytes")
    return str(value)


def _esc(s: str) -> str:
    return escape(s) if ("&" in s or "<" in s or ">" in s) else s


def _emit(key: Any, value: Any, out: list, root: bool) -> None:
    name = _check_name(key)
    if not hasattr(value, "__iter__") or isinstance(value, (str, bytes, bytearray, memoryview, dict)):
        value = (value,)
    elif not isinstance(value, (list, tuple)):
        raise _Unsupported("iterable")   # before reading it: a generator must reach xmltodict unread
    for index, v in enumerate(value):
        if root and index > 0:
            raise _Unsupported("several roots")
        if v is None:
            out.append(f"<{name}/>")
            continue
        if isinstance(v, str):
            out.append(f"<{name}>{_esc(v)}</{name}>" if v else f"<{name}/>")
            continue
        if not isinstance(v, dict):
            if hasattr(v, "__iter__"):
                raise _Unsupported("nested iterable")
            t = _text(v)
            out.append(f"<{name}>{_esc(t)}</{name}>" if t else f"<{name}/>")
            continue
        attrs, cdata, children = "", None, []
        for ik, iv in v.items():
            if ik == "#text":
                cdata = None if iv is None else _text(iv)
            elif isinstance(ik, str) and ik.startswith("@"):
                if ik == "@xmlns" and isinstance(iv, dict):
                    raise _Unsupported("@xmlns map")
                attrs += f" {_check_name(ik[1:])}={quoteattr('' if iv is None else _text(iv))}"
            elif not (isinstance(iv, list) and not iv):
                children.append((ik, iv))
        start = len(out)
        out.append(f"<{name}{attrs}")
        for ck, cv in children:
            _emit(ck, cv, out, False)
        if cdata:
            out.append(_esc(cdata))
        if len(out) == start + 1:      # no child written and no text: the short empty element
            out[start] += "/>"
        else:
            out[start] += ">"
            out.append(f"</{name}>")


def unparse(original, input_dict: Any, output: Any = None, encoding: str = "utf-8", full_document: bool = True,
            short_empty_elements: bool = False, **kwargs: Any) -> Any:
    """``xmltodict.unparse`` for moto's calls (see the module doc); ``original`` for everything else."""
    if (output is not None or encoding != "utf-8" or not short_empty_elements or kwargs.get("pretty")
            or set(kwargs) - {"pretty"} or not isinstance(input_dict, dict)):
        return original(input_dict, output=output, encoding=encoding, full_document=full_document,
                        short_empty_elements=short_empty_elements, **kwargs)
    out: list = [_PROLOG] if full_document else []
    try:
        if full_document and len(input_dict) != 1:
            raise _Unsupported("one root")
        for key, value in input_dict.items():
            _emit(key, value, out, full_document)
    except _Unsupported:
        return original(input_dict, output=output, encoding=encoding, full_document=full_document,
                        short_empty_elements=short_empty_elements, **kwargs)
    return "".join(out)


class _XmlToDict:
    """What moto's serializer module sees as ``xmltodict``: this module's ``unparse``, the rest xmltodict's."""

    def __init__(self, module: Any):
        self._module = module

    def unparse(self, input_dict: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            return self._module.unparse(input_dict, *args, **kwargs)
        return unparse(self._module.unparse, input_dict, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def install() -> bool:
    """Give ``moto.core.serialize`` this writer as its ``xmltodict`` (once)."""
    from moto.core import serialize

    return moto_patch.replace(serialize, "xmltodict", _XmlToDict)


def uninstall() -> None:
    from moto.core import serialize

    moto_patch.restore(serialize, "xmltodict")
