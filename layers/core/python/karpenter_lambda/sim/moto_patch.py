"""One way to swap a moto method for a faster one and put it back: the speedup modules (``moto_speedups_*``) each
replace a method on a moto class; the original is kept on the class under ``karpenter_lambda_original_<name>`` so
that ``install`` is idempotent and ``uninstall`` restores exactly what was there (tests compare both)."""

from __future__ import annotations

from typing import Any, Callable


def _key(name: str) -> str:
    return f"karpenter_lambda_original_{name}"


def installed(owner: Any, name: str) -> bool:
    """Whether ``owner.name`` is currently replaced."""
    return _key(name) in vars(owner)


def original(owner: Any, name: str) -> Callable:
    """The method ``owner.name`` had before it was replaced (the current one if it is not)."""
    return vars(owner).get(_key(name), getattr(owner, name))


def replace(owner: Any, name: str, make: Callable[[Callable], Callable]) -> bool:
    """Replace ``owner.name`` with ``make(original)`` unless already replaced; always True (installed)."""
    if not installed(owner, name):
        before = getattr(owner, name)
        setattr(owner, name, make(before))
        setattr(owner, _key(name), before)
    return True


def restore(owner: Any, name: str) -> None:
    """Put the original ``owner.name`` back (nothing if it was not replaced)."""
    if installed(owner, name):
        setattr(owner, name, vars(owner)[_key(name)])
        delattr(owner, _key(name))
