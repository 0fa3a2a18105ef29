"""Moved to :mod:`karpenter_lambda.offpeak.window` (off-peak is its own pure package); this name stays importable
for ``sim/simulator.py`` until it imports the new home."""

from ..offpeak.window import Window, localize, next_window, window_at  # noqa: F401

__all__ = ["Window", "window_at", "next_window", "localize"]
