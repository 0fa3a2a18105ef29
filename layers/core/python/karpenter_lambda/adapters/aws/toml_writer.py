"""A small TOML writer for Bottlerocket's user data (tables, arrays of tables, scalars, arrays, inline tables)."""

from __future__ import annotations

import re
from typing import Any


class TOMLWriteError(ValueError):
    """A value TOML cannot hold."""


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(k: str) -> str:
    return k if _BARE_KEY.match(k) else "'" + k + "'" if "'" not in k and "\n" not in k else _toml_str(k)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "isoformat"):
        return v.isoformat()
    raise TOMLWriteError(f"cannot write {v!r} as TOML")


def dump_toml(doc: dict) -> str:
    """A small TOML writer (tables, arrays of tables, scalars, arrays, inline tables) for Bottlerocket settings."""
    out: list[str] = []

    def header(path: list[str], array: bool = False) -> str:
        inner = ".".join(_toml_key(p) for p in path)
        return f"[[{inner}]]" if array else f"[{inner}]"

    def emit(table: dict, path: list[str]) -> None:
        scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_table_array(v)]
        subtables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
        arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
        if path and (scalars or (not subtables and not arrays)):
            out.append(header(path))
        for k, v in scalars:
            out.append(f"{_toml_key(k)} = {_toml_value(v)}")
        if scalars or (path and not subtables and not arrays):
            out.append("")
        for k, v in subtables:
            emit(v, path + [k])
        for k, items in arrays:
            for item in items:
                out.append(header(path + [k], array=True))
                for ik, iv in item.items():
                    out.append(f"{_toml_key(ik)} = {_toml_value(iv)}")
                out.append("")

    emit(doc, [])
    return "\n".join(out).strip("\n") + "\n"


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)
