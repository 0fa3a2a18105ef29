"""Karpenter objects per cluster in DynamoDB, with optimistic locking.

One item per object in the state table: hash key ``<cluster>#<Kind>``, range
key the object name (see :mod:`.models` and docs/state.md).  Every write is
conditional on the item's ``version`` (pynamodb ``VersionAttribute``), so two
writers never silently overwrite each other: :meth:`Store.update` re-reads and
retries, :meth:`Store.put` with a ``metadata.resourceVersion`` fails with
:class:`Conflict` when the object changed since it was read.

Objects come back as ``api.objects`` classes (``NodePool``, ``EC2NodeClass``,
``NodeClaim``, ``NodeOverlay``, ``OffPeakSchedule``; other kinds as ``KubeObject``) with
``metadata.resourceVersion`` = the item version (a string, as in Kubernetes),
``metadata.uid``, ``metadata.creationTimestamp`` and ``metadata.generation``
(bumped when ``spec`` changes) maintained by the store.
"""

from __future__ import annotations

import copy
import random
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Callable, Iterator

from botocore.exceptions import (
    BotoCoreError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ReadTimeoutError,
)
from pynamodb.exceptions import DoesNotExist, PynamoDBException, TableDoesNotExist

from ...api.objects import KIND_BY_NAME, KubeObject
from ...api.times import format_time
from .errors import AlreadyExists, Conflict, NotFound, StoreError, StoreUnavailable
from .models import resolve_endpoint, resolve_region, state_model, state_table_name

# Metadata fields the store owns: callers' values are replaced (resourceVersion is never stored).
SYSTEM_METADATA = ("resourceVersion", "uid", "creationTimestamp", "generation")
# Annotation domains controllers write to (e.g. karpenter.sh/nodepool-hash); `apply` keeps them.
CONTROLLER_ANNOTATION_DOMAINS = ("karpenter.sh/", "karpenter.k8s.aws/", "compatibility.karpenter.sh/")

# What a person may type for a kind (CLI, tests): plural, singular and short names, any case.
KIND_ALIASES: dict[str, str] = {
    "nodepool": "NodePool", "nodepools": "NodePool", "np": "NodePool",
    "ec2nodeclass": "EC2NodeClass", "ec2nodeclasses": "EC2NodeClass", "ec2nc": "EC2NodeClass",
    "nodeclass": "EC2NodeClass", "nodeclasses": "EC2NodeClass",
    "nodeclaim": "NodeClaim", "nodeclaims": "NodeClaim", "nc": "NodeClaim",
    "offpeakschedule": "OffPeakSchedule", "offpeakschedules": "OffPeakSchedule", "ops": "OffPeakSchedule",
    "nodeoverlay": "NodeOverlay", "nodeoverlays": "NodeOverlay", "overlay": "NodeOverlay", "overlays": "NodeOverlay",
}

_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes generateName alphabet


def resolve_kind(kind: str | type[KubeObject]) -> str:
    """Canonical kind name: ``NodePool`` for ``nodepools``/``np``/``NodePool``/the class; other kinds unchanged."""
    if isinstance(kind, type):
        return kind.kind_name
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    return KIND_ALIASES.get(kind.lower(), kind)


rfc3339 = format_time   # a datetime (naive = UTC) as RFC 3339 text: api.times, one definition


def merge_patch(target: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386): nested dicts merge, ``None`` deletes a key, anything else replaces."""
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _carry_system_metadata(meta: dict, old_meta: dict, created: str, spec_changed: bool) -> None:
    """Set the store-owned metadata on a new revision: uid and creationTimestamp stay (or are assigned once),
    generation starts at 1 and counts spec changes.  Whatever the caller put in these fields is ignored."""
    meta["uid"] = old_meta.get("uid") or str(uuid.uuid4())
    meta["creationTimestamp"] = old_meta.get("creationTimestamp") or created
    meta["generation"] = int(old_meta.get("generation") or 0) + 1 if (spec_changed or not old_meta.get("generation")) \
        else int(old_meta["generation"])


def _normalised(doc: dict) -> dict:
    """``doc`` without empty ``status``/``spec`` (reading ``obj.status`` inserts an empty dict)."""
    return {k: v for k, v in doc.items() if not (k in ("status", "spec") and not v)}


def _conditional_failed(e: Exception) -> bool:
    return isinstance(e, PynamoDBException) and e.cause_response_code == "ConditionalCheckFailedException"


class Store:
    """The state of one cluster: NodePools, EC2NodeClasses, NodeClaims (and any other kind) in DynamoDB.

    ``table_name`` defaults to env ``KARPENTER_LAMBDA_STATE_TABLE`` or ``karpenter-lambda-state``;
    ``region`` to ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` / ``us-east-1``; ``endpoint_url`` to
    ``KARPENTER_LAMBDA_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_DYNAMODB`` / ``AWS_ENDPOINT_URL`` (unset = AWS).
    ``clock`` (keyword only) returns the current time for timestamps (the simulator passes its virtual clock).
    """

    def __init__(self, cluster: str, table_name: str | None = None, region: str | None = None,
                 endpoint_url: str | None = None, *, clock: Callable[[], datetime] | None = None):
        if not isinstance(cluster, str) or not cluster.strip():
            raise ValueError("cluster name must be a non-empty string")
        if "#" in cluster:
            raise ValueError(f'cluster name "{cluster}" must not contain "#" (it separates cluster and kind in the table key)')
        self.cluster = cluster
        self.table_name = state_table_name(table_name)
        self.region = resolve_region(region)
        self.endpoint_url = resolve_endpoint(endpoint_url)
        self.model = state_model(self.table_name, self.region, self.endpoint_url)
        self._clock = clock or (lambda: datetime.now(timezone.utc))

    def __repr__(self) -> str:
        where = self.endpoint_url or f"AWS {self.region}"
        return f"Store(cluster={self.cluster!r}, table={self.table_name!r}, at={where!r})"

    # -- table -----------------------------------------------------------------
    def ensure_table(self) -> bool:
        """Create the state table (on-demand billing) if it does not exist; True if it was created."""
        with self._errors("create table"):
            if self.model.exists():
                return False
            try:
                self.model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
            except PynamoDBException as e:
                if e.cause_response_code == "ResourceInUseException":  # another process created it meanwhile
                    return False
                raise
            return True

    def table_exists(self) -> bool:
        with self._errors("describe table"):
            return self.model.exists()

    # -- reads -----------------------------------------------------------------
    def get(self, kind, name: str) -> KubeObject | None:
        kind = resolve_kind(kind)
        item = self._get_item(kind, name)
        return self._to_object(item) if item is not None else None

    def list(self, kind) -> list[KubeObject]:
        """Every object of ``kind`` in this cluster, sorted by name.  Eventually consistent (half the read units of
        the sweeps' every-minute lists, README "What it costs to run"), as Karpenter's informer caches are: every
        write is conditional on the version read (a stale list cannot overwrite), :meth:`get` before a decision
        is strongly consistent, and the orphan GC waits ``orphan_min_age`` (30 s) -- far past DynamoDB's
        propagation (typically under a second) -- before it trusts a missing record."""
        kind = resolve_kind(kind)
        with self._errors(f"list {kind}"):
            return [self._to_object(item) for item in self.model.query(self._pk(kind), consistent_read=False)]

    # -- writes ----------------------------------------------------------------
    def create(self, obj: KubeObject) -> KubeObject:
        """Create ``obj``; :class:`AlreadyExists` if an object of that kind and name exists.

        With no ``metadata.name`` but a ``metadata.generateName``, a 5-character random suffix is added.
        """
        kind = resolve_kind(obj.kind)
        generate = obj.doc.get("metadata", {}).get("generateName") if not obj.name else None
        if not obj.name and not generate:
            raise ValueError(f"{kind}: metadata.name (or metadata.generateName) is required")
        for _ in range(8 if generate else 1):
            doc = copy.deepcopy(obj.doc)
            if generate:
                doc["metadata"]["name"] = generate + "".join(random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
            name = doc["metadata"]["name"]
            now = rfc3339(self._clock())
            meta = doc["metadata"]
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now
            meta["generation"] = 1
            item = self._to_item(kind, doc, version=None, created_at=now, updated_at=now)
            try:
                with self._errors(f"create {kind}/{name}", passthrough_conditional=True):
                    item.save()
            except PynamoDBException as e:
                if _conditional_failed(e):
                    if generate:
                        continue
                    raise AlreadyExists(kind, name, self.cluster) from None
                raise
            return self._to_object(item)
        raise AlreadyExists(kind, generate + "*", self.cluster)

    def put(self, obj: KubeObject, retries: int = 10) -> KubeObject:
        """Create or replace ``obj`` (metadata, spec and status as given), bumping the version.

        If ``obj.metadata.resourceVersion`` is set the write only succeeds when the stored object still has
        that version (otherwise :class:`Conflict`, no retry): read -> modify -> ``put`` is safe.  Without it
        the current version is read and the write retried if another writer slips in between.
        """
        return self._write(obj, keep_status=False, honour_version=True, retries=retries)

    def apply(self, obj: KubeObject, retries: int = 10) -> KubeObject:
        """Create or update from a user's manifest, as ``kubectl apply`` would for these fields.

        ``metadata.labels``/``annotations``, ``spec`` come from ``obj``; the stored ``status``,
        ``finalizers`` and controller annotations (``karpenter.sh/...``, ``karpenter.k8s.aws/...``) are kept;
        any ``resourceVersion`` in the manifest is ignored.
        """
        return self._write(obj, keep_status=True, honour_version=False, retries=retries)

    def update(self, kind, name: str, mutate: Callable[[KubeObject], KubeObject | None], retries: int = 10) -> KubeObject:
        """Read-modify-write under optimistic locking.

        ``mutate`` gets a fresh copy of the stored object and changes it in place (returning None) or returns
        a replacement; on a concurrent write it is called again on the newer object, up to ``retries`` more
        times, then :class:`Conflict`.  No write happens when ``mutate`` changes nothing.  :class:`NotFound`
        if the object does not exist.  Returns the stored object.
        """
        kind = resolve_kind(kind)
        for attempt in range(retries + 1):
            item = self._get_item(kind, name)
            if item is None:
                raise NotFound(kind, name, self.cluster)
            current = self._to_object(item)
            before = current.to_dict()
            result = mutate(current)
            new = result if result is not None else current
            if not isinstance(new, KubeObject):
                raise TypeError(f"update({kind}/{name}): mutate must return a KubeObject or None, got {type(new).__name__}")
            if new.kind != kind or new.name != name:
                raise ValueError(f"update({kind}/{name}): mutate must not change kind or name (got {new.kind}/{new.name})")
            if _normalised(new.doc) == _normalised(before):
                return current
            doc = new.to_dict()
            now = rfc3339(self._clock())
            _carry_system_metadata(doc.setdefault("metadata", {}), before.get("metadata", {}), item.created_at or now,
                                   spec_changed=(doc.get("spec") or None) != (before.get("spec") or None))
            new_item = self._to_item(kind, doc, version=item.version, created_at=item.created_at or now, updated_at=now)
            try:
                with self._errors(f"update {kind}/{name}", passthrough_conditional=True):
                    new_item.save()
            except PynamoDBException as e:
                if _conditional_failed(e):
                    self._backoff(attempt)
                    continue
                raise
            return self._to_object(new_item)
        raise Conflict(kind, name, self.cluster, f"gave up after {retries + 1} attempts")

    def update_status(self, kind, name: str, status_patch: dict, retries: int = 10) -> KubeObject:
        """Merge ``status_patch`` into ``status`` (JSON merge patch: ``None`` deletes a key, lists replace)."""
        if not isinstance(status_patch, dict):
            raise TypeError("status_patch must be a dict")

        def mutate(obj: KubeObject) -> None:
            obj.doc["status"] = merge_patch(obj.doc.get("status") or {}, status_patch)

        return self.update(kind, name, mutate, retries=retries)

    def delete(self, kind, name: str) -> bool:
        """Delete the object; True if it existed, False if there was nothing to delete."""
        kind = resolve_kind(kind)
        item = self.model(self._pk(kind), name)
        try:
            with self._errors(f"delete {kind}/{name}", passthrough_conditional=True):
                item.delete(condition=self.model.pk.exists(), add_version_condition=False)
        except PynamoDBException as e:
            if _conditional_failed(e):
                return False
            raise
        return True

    def delete_all(self, kind) -> int:
        """Delete every object of ``kind`` in this cluster (tests, simulator resets); returns how many."""
        return sum(self.delete(kind, obj.name) for obj in self.list(kind))

    # -- internals -------------------------------------------------------------
    def _pk(self, kind: str) -> str:
        return f"{self.cluster}#{kind}"

    def _get_item(self, kind: str, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind}: name must be a non-empty string")
        with self._errors(f"get {kind}/{name}"):
            try:
                return self.model.get(self._pk(kind), name, consistent_read=True)
            except DoesNotExist:
                return None

    def _write(self, obj: KubeObject, *, keep_status: bool, honour_version: bool, retries: int) -> KubeObject:
        kind = resolve_kind(obj.kind)
        name = obj.name
        if not name:
            raise ValueError(f"{kind}: metadata.name is required")
        expected = obj.doc.get("metadata", {}).get("resourceVersion") if honour_version else None
        for attempt in range(retries + 1):
            current = self._get_item(kind, name)
            doc = copy.deepcopy(obj.doc)
            meta = doc.setdefault("metadata", {})
            now = rfc3339(self._clock())
            if current is None:
                if expected is not None:
                    raise Conflict(kind, name, self.cluster, f"resourceVersion {expected} was given but the object no longer exists")
                _carry_system_metadata(meta, {}, now, spec_changed=False)
                version, created_at = None, now
            else:
                if expected is not None and str(expected) != str(current.version):
                    raise Conflict(kind, name, self.cluster, f"resourceVersion {expected} is stale (stored: {current.version})")
                old_meta = current.metadata or {}
                _carry_system_metadata(meta, old_meta, current.created_at or now,
                                       spec_changed=(doc.get("spec") or None) != (current.spec or None))
                if keep_status:
                    if current.status:
                        doc["status"] = current.status
                    else:
                        doc.pop("status", None)
                    if old_meta.get("finalizers") and "finalizers" not in meta:
                        meta["finalizers"] = old_meta["finalizers"]
                    kept = {k: v for k, v in (old_meta.get("annotations") or {}).items()
                            if k.startswith(CONTROLLER_ANNOTATION_DOMAINS) and k not in (meta.get("annotations") or {})}
                    if kept:
                        meta["annotations"] = {**(meta.get("annotations") or {}), **kept}
                version, created_at = current.version, current.created_at or now
            item = self._to_item(kind, doc, version=version, created_at=created_at, updated_at=now)
            try:
                with self._errors(f"write {kind}/{name}", passthrough_conditional=True):
                    item.save()
            except PynamoDBException as e:
                if _conditional_failed(e):
                    if expected is not None:
                        raise Conflict(kind, name, self.cluster, f"resourceVersion {expected} is stale") from None
                    self._backoff(attempt)
                    continue
                raise
            return self._to_object(item)
        raise Conflict(kind, name, self.cluster, f"gave up after {retries + 1} attempts")

    def _to_item(self, kind: str, doc: dict, *, version, created_at, updated_at):
        meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "resourceVersion"}
        item = self.model(
            self._pk(kind), meta["name"],
            cluster=self.cluster, kind=kind, api_version=doc.get("apiVersion"),
            metadata=meta, spec=doc.get("spec"), status=doc.get("status") or None,
            created_at=created_at, updated_at=updated_at,
        )
        if version is not None:
            item.version = version
        return item

    def _to_object(self, item) -> KubeObject:
        meta = dict(item.metadata or {})
        meta["name"] = item.sk
        meta["resourceVersion"] = str(item.version)
        doc: dict = {"apiVersion": item.api_version, "kind": item.kind, "metadata": meta}
        if item.api_version is None:
            del doc["apiVersion"]
        if item.spec is not None:
            doc["spec"] = item.spec
        if item.status:
            doc["status"] = item.status
        cls = KIND_BY_NAME.get(item.kind, KubeObject)
        return cls(doc)

    @staticmethod
    def _backoff(attempt: int) -> None:
        time.sleep(random.uniform(0, min(0.1, 0.002 * (2 ** attempt))))

    @contextmanager
    def _errors(self, op: str, passthrough_conditional: bool = False) -> Iterator[None]:
        """Turn boto/pynamodb failures into a :class:`StoreError` that says what to fix."""
        try:
            yield
        except StoreError:
            raise
        except TableDoesNotExist:
            raise StoreUnavailable(self._missing_table_message()) from None
        except PynamoDBException as e:
            if passthrough_conditional and _conditional_failed(e):
                raise
            raise self._translate(op, e.cause, e.cause_response_code, e.cause_response_message or e.msg) from e
        except BotoCoreError as e:
            raise self._translate(op, e, None, str(e)) from e

    def _translate(self, op: str, cause, code: str | None, message: str | None) -> StoreError:
        where = self.endpoint_url or f"AWS region {self.region}"
        if isinstance(cause, (EndpointConnectionError, ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError)):
            hint = "is moto_server running?" if self.endpoint_url else "check the network and the region"
            return StoreUnavailable(f"cannot reach DynamoDB at {where}: {hint} ({cause})")
        if isinstance(cause, NoCredentialsError):
            return StoreUnavailable("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
                                    "AWS_PROFILE (any values work for moto_server)")
        if isinstance(cause, NoRegionError):
            return StoreUnavailable("no AWS region: pass --region or set AWS_REGION")
        if code == "ResourceNotFoundException":
            return StoreUnavailable(self._missing_table_message())
        if code in ("UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException", "AccessDeniedException"):
            return StoreUnavailable(f"DynamoDB at {where} refused the request ({code}): check AWS credentials and "
                                    f"permissions on table {self.table_name}: {message}")
        return StoreError(f"DynamoDB {op} failed on table {self.table_name} at {where} (cluster {self.cluster}): "
                          f"{code + ': ' if code else ''}{message}")

    def _missing_table_message(self) -> str:
        where = self.endpoint_url or f"AWS region {self.region}"
        return (f"state table {self.table_name} does not exist at {where}: deploy the stack, set "
                f"KARPENTER_LAMBDA_STATE_TABLE to the right name, or create it with "
                f"`karpenter-lambda apply --create-table -f ...`")
