"""Wording shared by the CLI and the simulator's events (pure)."""

from __future__ import annotations

__all__ = ["plural", "one_edit", "near", "did_you_mean"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 pod``, ``3 pods``; ``many`` for irregular plurals (``plural(2, "EC2NodeClass", "EC2NodeClasses")``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def one_edit(a: str, b: str) -> bool:
    """Are ``a`` and ``b`` one typo apart: one character changed, added or dropped, or two neighbours swapped?"""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def near(word: str, candidates) -> list[str]:
    """The ``candidates`` one typo from ``word`` (:func:`one_edit`), sorted, each once."""
    return sorted({c for c in candidates if one_edit(word, c)})


def did_you_mean(options, most: int | None = None) -> str:
    """`` (did you mean a or b?)`` for ``options`` (at most ``most`` of them, then `` or ...``), "" for none."""
    options = list(options)
    if not options:
        return ""
    more = " or ..." if most is not None and len(options) > most else ""
    return f" (did you mean {' or '.join(options if most is None else options[:most])}{more}?)"
