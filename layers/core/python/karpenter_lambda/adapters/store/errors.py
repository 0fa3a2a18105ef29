"""Errors raised by the state store; each message names the kind, the object and the cluster."""

from __future__ import annotations


class StoreError(Exception):
    """Base class for every state-store error."""


class NotFound(StoreError):
    def __init__(self, kind: str, name: str, cluster: str):
        self.kind, self.name, self.cluster = kind, name, cluster
        super().__init__(f'{kind} "{name}" not found in cluster "{cluster}"')


class AlreadyExists(StoreError):
    def __init__(self, kind: str, name: str, cluster: str):
        self.kind, self.name, self.cluster = kind, name, cluster
        super().__init__(f'{kind} "{name}" already exists in cluster "{cluster}"')


class Conflict(StoreError):
    """A write lost against a concurrent writer (optimistic locking) and could not be retried."""

    def __init__(self, kind: str, name: str, cluster: str, detail: str = ""):
        self.kind, self.name, self.cluster = kind, name, cluster
        msg = f'{kind} "{name}" in cluster "{cluster}" was modified concurrently'
        super().__init__(f"{msg}: {detail}" if detail else msg)


class StoreUnavailable(StoreError):
    """DynamoDB cannot be reached, the table is missing, or credentials are absent: an environment problem."""
