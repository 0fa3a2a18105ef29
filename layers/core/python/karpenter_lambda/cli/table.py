"""Aligned text tables for people (the CLI's default output)."""

from __future__ import annotations


def render_table(headers: list[str], rows: list[list], right: set[int] | None = None) -> str:
    """Columns padded to their widest cell; columns listed in ``right`` are right-aligned (numbers)."""
    right = right or set()
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [(r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i])) for i in range(len(headers))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
