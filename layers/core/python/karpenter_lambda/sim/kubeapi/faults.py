"""Fault injection on the local API server: the next N matching requests answered with an error status."""

from __future__ import annotations

import re
import threading


class FaultHooks:
    """``add_fault`` / ``clear_faults`` for :class:`~karpenter_lambda.sim.kubeapi.KubeAPIServer`; the handler asks
    ``_take_fault`` before routing a request."""

    def _init_faults(self) -> None:
        self._faults: list[dict] = []
        self._fault_lock = threading.Lock()

    def add_fault(
        self,
        status: int = 500,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        retry_after: int | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` and the regex ``path`` with ``status``."""
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}.get(status, "InternalError")
        with self._fault_lock:
            self._faults.append(
                {
                    "status": status,
                    "times": times,
                    "method": method.upper() if method else None,
                    "path": re.compile(path) if path else None,
                    "retry_after": retry_after,
                    "reason": reason,
                    "message": message or f"injected fault {status}",
                }
            )

    def clear_faults(self) -> None:
        with self._fault_lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> dict | None:
        with self._fault_lock:
            for f in self._faults:
                if f["times"] <= 0:
                    continue
                if f["method"] and f["method"] != method:
                    continue
                if f["path"] and not f["path"].search(path):
                    continue
                f["times"] -= 1
                return f
            return None

