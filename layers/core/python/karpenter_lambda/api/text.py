"""Wording shared by the CLI and the simulator's events (pure)."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 pod``, ``3 pods``; ``many`` for irregular plurals (``plural(2, "EC2NodeClass", "EC2NodeClasses")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
