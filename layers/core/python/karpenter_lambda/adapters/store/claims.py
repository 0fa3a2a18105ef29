"""Launch claims: the provisioner's guard against duplicate launches and limit overshoot.

Three kinds of items live in the **state table** next to the store's objects (same ``pk``/``sk`` keys,
different ``pk`` prefixes, so the store never lists them).  Every item stays small whatever the number of
NodeClaims (a DynamoDB item is limited to 400 KB):

* **NodePool usage** -- ``pk = <cluster>#NodePoolUsage``, ``sk = <nodepool>``: only numeric counters
  ``usage:<resource>`` (cpu in millicores, memory bytes, ``nodes`` count, ...), the total counted against the
  NodePool's ``limits``.  Changed only with ``ADD``; an increase is conditional, per limited resource, on
  ``usage:<r> <= limit - request`` (concurrent provisioners can never exceed a limit).
* **Launch claim** -- ``pk = <cluster>#LaunchClaim``, ``sk = <nodepool>#<nodeclaim>``: what one NodeClaim
  contributes (``resources`` and ``pods`` as JSON, ``at``, ``rev``).  Put with ``attribute_not_exists(pk)``: the
  same plan delivered twice is refused.
* **Pod reservations** -- ``pk = <cluster>#PodReservation``, ``sk = <pod uid>``, ``nodeClaim``, ``expiresAt``
  and ``ttl`` (epoch seconds).  A pod can be reserved by one NodeClaim at a time: the put is conditional
  on no live reservation by another NodeClaim.  Made by a launch's commit, or by :meth:`LaunchClaims.nominate`
  when a later round places the pod on an in-flight NodeClaim (the same condition; the pod is appended to that
  NodeClaim's claim ``pods`` so :meth:`LaunchClaims.release` deletes it too).

The claim, the usage increase and the first 98 reservations go into ONE ``TransactWriteItems``, so a plan either
holds its pods and its share of the limits, or nothing.  The cancellation reasons say which part failed
(``ConditionalCheckFailed``: duplicate / limit / pod taken); any other reason (``TransactionConflict``, throttling,
a validation error) is not a conflict: the transaction is retried a few times, then :class:`ClaimsUnavailable` is
raised (the SQS record fails and is redelivered, which is safe: the names are deterministic).

:meth:`LaunchClaims.release` and :meth:`LaunchClaims.adjust` change the claim item and the counters in one
transaction conditional on the claim's ``rev``, retried in a loop (not by recursion) when a concurrent writer won.
Claims an older version wrote into the usage item (``claim:<nodeclaim>`` attributes) are still listed and released.

The launcher (:mod:`karpenter_lambda.controllers.launcher`) commits and releases through :class:`LaunchClaims`; it
is given a boto3 low-level DynamoDB client (``Environment.dynamodb``) and makes no client itself.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Callable

from .tables import DEFAULT_STATE_TABLE, STATE_TABLE_ENV

RESERVATION_TTL_SECONDS = 20 * 60  # longer than launch + the 15 min registration timeout
USAGE_KIND = "NodePoolUsage"
CLAIM_KIND = "LaunchClaim"
RESERVATION_KIND = "PodReservation"
TRANSACTION_ITEMS = 100            # DynamoDB's limit of actions per TransactWriteItems
REWRITE_ATTEMPTS = 20              # re-reads of a claim a concurrent writer keeps changing (release, adjust)
RETRIES = 5                        # attempts for a transaction cancelled for a reason other than a condition
_RETRYABLE_REASONS = ("TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded",
                      "RequestLimitExceeded", "InternalServerError")


class ClaimsUnavailable(RuntimeError):
    """A launch-claim write failed for a reason other than a condition (retryable; not a conflict)."""


def _attr_name(prefix: str, key: str) -> str:
    return f"{prefix}:{key}"


@dataclass
class CommitResult:
    ok: bool
    duplicate: bool = False          # the NodeClaim was already claimed (same plan delivered twice)
    limit_exceeded: bool = False     # the NodePool's limits would be exceeded
    taken_pods: list[str] = field(default_factory=list)   # pod uids reserved by another NodeClaim
    message: str = ""


def _freeing(headroom: dict[str, int] | None) -> str:
    """The part of a limit refusal that says what the replaced NodeClaims would free (empty without any)."""
    if not headroom:
        return ""
    return f"; the NodeClaims it replaces free {', '.join(f'{r} {v}' for r, v in sorted(headroom.items()))}"


class LaunchClaims:
    """Conditional writes on the state table (boto3 low-level DynamoDB client)."""

    def __init__(self, dynamodb_client, cluster: str, table_name: str | None = None,
                 clock: Callable[[], float] = time.time, reservation_ttl: int = RESERVATION_TTL_SECONDS,
                 retries: int = RETRIES, sleep: Callable[[float], None] = time.sleep):
        self.ddb = dynamodb_client
        self.cluster = cluster
        self.table = table_name or os.environ.get(STATE_TABLE_ENV, DEFAULT_STATE_TABLE)
        self.clock = clock
        self.reservation_ttl = reservation_ttl
        self.retries = retries
        self.sleep = sleep

    # -- keys ------------------------------------------------------------------------------------
    def _usage_key(self, nodepool: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{USAGE_KIND}"}, "sk": {"S": nodepool}}

    def _claim_key(self, nodepool: str, nodeclaim: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{CLAIM_KIND}"}, "sk": {"S": f"{nodepool}#{nodeclaim}"}}

    def _reservation_key(self, uid: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{RESERVATION_KIND}"}, "sk": {"S": uid}}

    # -- reads -----------------------------------------------------------------------------------
    @staticmethod
    def _totals(item: dict) -> dict[str, int]:
        return {k[len("usage:"):]: int(v["N"]) for k, v in item.items() if k.startswith("usage:")}

    @staticmethod
    def _legacy(item: dict) -> dict[str, dict]:
        """Claims an older version kept inside the usage item (``claim:<nodeclaim>`` JSON attributes): read so they
        can still be released (their usage is in the counters), never written any more."""
        return {k[len("claim:"):]: {**json.loads(v["S"]), "legacy": True} for k, v in item.items() if k.startswith("claim:")}

    @staticmethod
    def _claim(item: dict) -> dict:
        return {"resources": json.loads(item["resources"]["S"]), "pods": json.loads(item["pods"]["S"]),
                "at": float(item["at"]["N"]), "rev": int(item["rev"]["N"])}

    def usage(self, nodepool: str) -> tuple[dict[str, int], dict[str, dict]]:
        """(totals per resource, claims by NodeClaim name) for one NodePool."""
        item = self.ddb.get_item(TableName=self.table, Key=self._usage_key(nodepool), ConsistentRead=True).get("Item") or {}
        claims = self._legacy(item)
        for it in self._query(f"{self.cluster}#{CLAIM_KIND}", prefix=f"{nodepool}#"):
            claims[it["sk"]["S"][len(nodepool) + 1:]] = self._claim(it)
        return self._totals(item), claims

    def all_usage(self) -> dict[str, tuple[dict[str, int], dict[str, dict]]]:
        out: dict[str, tuple[dict[str, int], dict[str, dict]]] = {}
        for item in self._query(f"{self.cluster}#{USAGE_KIND}"):
            out[item["sk"]["S"]] = (self._totals(item), self._legacy(item))
        for it in self._query(f"{self.cluster}#{CLAIM_KIND}"):
            nodepool, _, name = it["sk"]["S"].partition("#")
            out.setdefault(nodepool, ({}, {}))[1][name] = self._claim(it)
        return out

    def _get_claim(self, nodepool: str, nodeclaim: str) -> dict | None:
        item = self.ddb.get_item(TableName=self.table, Key=self._claim_key(nodepool, nodeclaim),
                                 ConsistentRead=True).get("Item")
        return self._claim(item) if item else None

    def reservations(self) -> dict[str, str]:
        """Live reservations: pod uid -> NodeClaim name (expired ones ignored), in the order they were made (by
        ``expiresAt``, then uid): a NodeClaim's pods in nomination order, as ``held_reservations`` takes them."""
        now = self.clock()
        live = []
        for item in self._query(f"{self.cluster}#{RESERVATION_KIND}"):
            expires = float(item.get("expiresAt", {"N": "0"})["N"])
            if expires > now:
                live.append((expires, item["sk"]["S"], item["nodeClaim"]["S"]))
        return {uid: nc for _e, uid, nc in sorted(live)}

    def _query(self, pk: str, prefix: str | None = None) -> list[dict]:
        items, kwargs = [], {}
        expr, values = "pk = :pk", {":pk": {"S": pk}}
        if prefix is not None:
            expr += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": prefix}
        while True:
            resp = self.ddb.query(TableName=self.table, KeyConditionExpression=expr,
                                  ExpressionAttributeValues=values, ConsistentRead=True, **kwargs)
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    # -- transactions ----------------------------------------------------------------------------
    def _transact(self, items: list[dict], what: str) -> list[str] | None:
        """Run one transaction; None when committed, else the cancellation codes of a condition failure.
        Other cancellations (conflict, throttling) are retried, then raise :class:`ClaimsUnavailable`."""
        for attempt in range(self.retries):
            try:
                self.ddb.transact_write_items(TransactItems=items)
                return None
            except self.ddb.exceptions.TransactionCanceledException as e:
                reasons = e.response.get("CancellationReasons") or []
                codes = [r.get("Code", "None") or "None" for r in reasons]
                if "ConditionalCheckFailed" in codes:
                    return codes
                other = sorted({c for c in codes if c not in ("None", "")}) or ["no reason given"]
                if not all(c in _RETRYABLE_REASONS for c in other) or attempt == self.retries - 1:
                    raise ClaimsUnavailable(
                        f"{what}: DynamoDB cancelled the transaction ({', '.join(other)}) after {attempt + 1} "
                        f"attempt(s); not a conflict with another NodeClaim, retry later") from e
                self.sleep(min(1.0, 0.05 * (2 ** attempt)) * (0.5 + random.random()))
        raise ClaimsUnavailable(f"{what}: no attempt made")   # retries < 1

    # -- writes ----------------------------------------------------------------------------------
    def _reservation_put(self, uid: str, nodepool: str, nodeclaim: str, now: float, previous: str | None) -> dict:
        """The conditional put of one pod's reservation by ``nodeclaim``: only if the pod has no live reservation by
        another NodeClaim, or (``previous``) still the one by the NodeClaim whose nomination no longer holds."""
        expires = now + self.reservation_ttl
        cond = "attribute_not_exists(pk) OR nodeClaim = :me OR expiresAt < :now"
        vals = {":me": {"S": nodeclaim}, ":now": {"N": repr(float(now))}}
        if previous and previous != nodeclaim:
            cond += " OR nodeClaim = :prev"
            vals[":prev"] = {"S": previous}
        return {"Put": {"TableName": self.table,
                        "Item": {**self._reservation_key(uid), "nodeClaim": {"S": nodeclaim}, "nodePool": {"S": nodepool},
                                 "expiresAt": {"N": repr(float(expires))}, "ttl": {"N": str(int(expires))}},
                        "ConditionExpression": cond, "ExpressionAttributeValues": vals}}

    def commit(self, nodepool: str, nodeclaim: str, request: dict[str, int], limits: dict[str, int],
               pod_uids: list[str], takeover: dict[str, str] | None = None,
               headroom: dict[str, int] | None = None) -> CommitResult:
        """Atomically: add the NodeClaim's claim to the NodePool usage (within limits) and reserve its pods.

        ``takeover`` (pod uid -> NodeClaim) names pods whose nomination by that NodeClaim no longer protects them
        (its node is initialized or full): their reservation may move here, conditionally on still being that one,
        so two provisioners can never both take the same pod.  ``headroom``: what NodeClaims this one replaces still
        count and will free (:meth:`claimed`): the limits hold with them gone, as Karpenter's disruption simulation
        counts the candidates out of the NodePool's usage (the replacement may take the NodePool over its limits
        until they are).
        """
        now = self.clock()
        takeover = takeover or {}
        headroom = {k: int(v) for k, v in (headroom or {}).items() if v}
        names: dict[str, str] = {}
        values: dict[str, dict] = {}
        adds, conds = [], []
        for i, (res, amount) in enumerate(sorted(request.items())):
            n, v = f"#u{i}", f":u{i}"
            names[n] = _attr_name("usage", res)
            values[v] = {"N": str(int(amount))}
            adds.append(f"{n} {v}")
            if res in limits:
                room = int(limits[res]) + headroom.get(res, 0) - int(amount)
                if room < 0:
                    return CommitResult(ok=False, limit_exceeded=True,
                                        message=f"NodePool {nodepool}: limits {res} {limits[res]} < request {amount}"
                                                + _freeing(headroom))
                values[f":r{i}"] = {"N": str(room)}
                conds.append(f"(attribute_not_exists({n}) OR {n} <= :r{i})")
        claim_item = {**self._claim_key(nodepool, nodeclaim), "nodePool": {"S": nodepool}, "nodeClaim": {"S": nodeclaim},
                      "resources": {"S": json.dumps(request, sort_keys=True)},
                      "pods": {"S": json.dumps(list(pod_uids))}, "at": {"N": repr(float(now))}, "rev": {"N": "1"}}
        items: list[dict] = [{"Put": {"TableName": self.table, "Item": claim_item,
                                      "ConditionExpression": "attribute_not_exists(pk)"}}]
        if adds:
            update = {"TableName": self.table, "Key": self._usage_key(nodepool), "UpdateExpression": "ADD " + ", ".join(adds),
                      "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
            if conds:
                update["ConditionExpression"] = " AND ".join(conds)
            items.append({"Update": update})
        head = len(items)
        items.extend(self._reservation_put(uid, nodepool, nodeclaim, now, takeover.get(uid)) for uid in pod_uids)
        # DynamoDB allows 100 actions per transaction: plans bigger than that reserve their pods in chunks
        # after the claim (still conditional, so a pod is never held by two NodeClaims).
        first, rest = items[:TRANSACTION_ITEMS], items[TRANSACTION_ITEMS:]
        codes = self._transact(first, f"launch claim of NodeClaim {nodeclaim} (NodePool {nodepool})")
        if codes is not None:
            return self._explain_cancel(codes, head, nodepool, nodeclaim, pod_uids, limits, headroom)
        taken = []
        for put in rest:
            try:
                self.ddb.put_item(**put["Put"])
            except self.ddb.exceptions.ConditionalCheckFailedException:
                taken.append(put["Put"]["Item"]["sk"]["S"])
        if taken:
            self.release(nodepool, nodeclaim)
            return CommitResult(ok=False, taken_pods=taken,
                                message=f"{len(taken)} pods reserved by other NodeClaims: {', '.join(taken[:5])}")
        return CommitResult(ok=True)

    def nominate(self, nodepool: str, nodeclaim: str, pod_uids: list[str],
                 takeover: dict[str, str] | None = None) -> list[str]:
        """Reserve ``pod_uids`` for ``nodeclaim``, an in-flight NodeClaim a later round nominated them to (the solver
        placed them in the room it has left), so every later round counts them against that room.

        Each reservation is put under the commit's condition (no live reservation by another NodeClaim, or still
        the one ``takeover`` names, whose nomination no longer holds), in transactions that also add the pods to the
        NodeClaim's launch claim (conditional on its ``rev``), so :meth:`release` deletes them with it.  Returns the
        uids refused: reserved by another NodeClaim meanwhile (a concurrent invocation took them)."""
        takeover = takeover or {}
        todo = list(dict.fromkeys(pod_uids))
        taken: list[str] = []
        conflicts = 0
        while todo:
            claim = self._get_claim(nodepool, nodeclaim)
            now = self.clock()
            head = 1 if claim is not None else 0
            batch = todo[:TRANSACTION_ITEMS - head]
            items: list[dict] = []
            if claim is not None:
                pods = claim["pods"] + [u for u in batch if u not in claim["pods"]]
                items.append({"Update": {
                    "TableName": self.table, "Key": self._claim_key(nodepool, nodeclaim),
                    "UpdateExpression": "SET #pods = :pods, #rev = :next", "ConditionExpression": "#rev = :rev",
                    "ExpressionAttributeNames": {"#pods": "pods", "#rev": "rev"},
                    "ExpressionAttributeValues": {":pods": {"S": json.dumps(pods)}, ":rev": {"N": str(claim["rev"])},
                                                  ":next": {"N": str(claim["rev"] + 1)}}}})
            items.extend(self._reservation_put(uid, nodepool, nodeclaim, now, takeover.get(uid)) for uid in batch)
            codes = self._transact(items, f"nominating {len(batch)} pods to NodeClaim {nodeclaim} (NodePool {nodepool})")
            if codes is None:
                todo = todo[len(batch):]
                continue
            refused = [uid for i, uid in enumerate(batch) if head + i < len(codes)
                       and codes[head + i] == "ConditionalCheckFailed"]
            if refused:
                taken.extend(refused)
                todo = [u for u in todo if u not in set(refused)]
                continue
            conflicts += 1   # the claim changed (another nomination, adjusted) or went meanwhile: read it again
            if conflicts >= REWRITE_ATTEMPTS:
                raise ClaimsUnavailable(f"nominating pods to NodeClaim {nodeclaim} (NodePool {nodepool}): its launch "
                                        f"claim changed concurrently {REWRITE_ATTEMPTS} times in a row; retry later")
        return taken

    def claimed(self, nodepool: str, nodeclaims: list[str]) -> dict[str, int]:
        """What the claims of ``nodeclaims`` in ``nodepool`` count against its limits, summed (those without a
        claim, or of another NodePool, count nothing): the ``headroom`` of the NodeClaims that replace them."""
        out: dict[str, int] = {}
        for name in dict.fromkeys(nodeclaims):
            claim = self._get_claim(nodepool, name)
            for res, v in ((claim or {}).get("resources") or {}).items():
                out[res] = out.get(res, 0) + int(v)
        return out

    def _explain_cancel(self, codes: list[str], head: int, nodepool, nodeclaim, uids, limits,
                        headroom: dict[str, int] | None = None) -> CommitResult:
        failed = lambda i: i < len(codes) and codes[i] == "ConditionalCheckFailed"   # noqa: E731
        if failed(0):
            return CommitResult(ok=False, duplicate=True, message=f"NodeClaim {nodeclaim} already claimed")
        taken = [uid for i, uid in enumerate(uids) if failed(head + i)]
        if head > 1 and failed(1):
            totals, _ = self.usage(nodepool)
            over = [f"{r} {totals.get(r, 0)}/{lim}" for r, lim in sorted(limits.items())]
            return CommitResult(ok=False, limit_exceeded=True, taken_pods=taken,
                                message=f"NodePool {nodepool}: limits reached (usage {', '.join(over)})"
                                        + _freeing(headroom))
        return CommitResult(ok=False, taken_pods=taken,
                            message=f"{len(taken)} pods reserved by other NodeClaims: {', '.join(taken[:5])}")

    def _rewrite(self, nodepool: str, nodeclaim: str, change: Callable[[dict], tuple[dict | None, dict[str, int]]],
                 what: str) -> tuple[bool, dict | None]:
        """Read the claim, compute (new resources or None to delete, counter deltas), write both in one transaction
        conditional on the claim's ``rev``; loop while a concurrent writer wins.  (False, None): no claim."""
        for _ in range(REWRITE_ATTEMPTS):
            claim = self._get_claim(nodepool, nodeclaim)
            if claim is None:
                return False, None
            new, deltas = change(claim)
            key = self._claim_key(nodepool, nodeclaim)
            rev = {":rev": {"N": str(claim["rev"])}}
            if new is None:
                items = [{"Delete": {"TableName": self.table, "Key": key, "ConditionExpression": "rev = :rev",
                                     "ExpressionAttributeValues": rev}}]
            else:
                items = [{"Update": {"TableName": self.table, "Key": key,
                                     "UpdateExpression": "SET #res = :res, #rev = :next",
                                     "ConditionExpression": "#rev = :rev",
                                     "ExpressionAttributeNames": {"#res": "resources", "#rev": "rev"},
                                     "ExpressionAttributeValues": {**rev, ":res": {"S": json.dumps(new, sort_keys=True)},
                                                                   ":next": {"N": str(claim["rev"] + 1)}}}}]
            deltas = {r: d for r, d in deltas.items() if d}
            if deltas:
                names = {f"#u{i}": _attr_name("usage", r) for i, r in enumerate(sorted(deltas))}
                vals = {f":d{i}": {"N": str(int(deltas[r]))} for i, r in enumerate(sorted(deltas))}
                items.append({"Update": {"TableName": self.table, "Key": self._usage_key(nodepool),
                                         "UpdateExpression": "ADD " + ", ".join(f"#u{i} :d{i}" for i in range(len(deltas))),
                                         "ExpressionAttributeNames": names, "ExpressionAttributeValues": vals}})
            if self._transact(items, f"{what} of NodeClaim {nodeclaim} (NodePool {nodepool})") is None:
                return True, claim
            # the claim changed (adjusted) or went (released) meanwhile: read it again
        raise ClaimsUnavailable(f"{what} of NodeClaim {nodeclaim} (NodePool {nodepool}): the claim changed "
                                f"concurrently {REWRITE_ATTEMPTS} times in a row; retry later")

    def _release_legacy(self, nodepool: str, nodeclaim: str) -> tuple[bool, dict | None]:
        """Remove a claim an older version wrote into the usage item, decrementing the counters (conditional on the
        attribute being unchanged; re-read in a loop)."""
        for _ in range(REWRITE_ATTEMPTS):
            item = self.ddb.get_item(TableName=self.table, Key=self._usage_key(nodepool), ConsistentRead=True).get("Item") or {}
            raw = item.get(_attr_name("claim", nodeclaim))
            if raw is None:
                return False, None
            claim = json.loads(raw["S"])
            names = {"#c": _attr_name("claim", nodeclaim)}
            values = {":old": raw}
            adds = []
            for i, (r, amount) in enumerate(sorted((claim.get("resources") or {}).items())):
                names[f"#u{i}"] = _attr_name("usage", r)
                values[f":d{i}"] = {"N": str(-int(amount))}
                adds.append(f"#u{i} :d{i}")
            expr = "REMOVE #c" + (" ADD " + ", ".join(adds) if adds else "")
            try:
                self.ddb.update_item(TableName=self.table, Key=self._usage_key(nodepool), UpdateExpression=expr,
                                     ConditionExpression="#c = :old", ExpressionAttributeNames=names,
                                     ExpressionAttributeValues=values)
                return True, claim
            except self.ddb.exceptions.ConditionalCheckFailedException:
                continue
        raise ClaimsUnavailable(f"releasing the legacy launch claim of NodeClaim {nodeclaim} (NodePool {nodepool}): "
                                f"changed concurrently {REWRITE_ATTEMPTS} times in a row; retry later")

    def adjust(self, nodepool: str, nodeclaim: str, actual: dict[str, int]) -> None:
        """Replace a claim's reserved resources by what was really launched (never above the reservation)."""
        def change(claim):
            old = claim["resources"]
            new = {r: min(int(actual.get(r, old[r])), int(old[r])) for r in old}
            return new, {r: new[r] - int(old[r]) for r in old}

        self._rewrite(nodepool, nodeclaim, change, "adjusting the launch claim")

    def release(self, nodepool: str, nodeclaim: str) -> bool:
        """Remove a NodeClaim's claim from its NodePool's usage and delete its pods' reservations. Idempotent."""
        released, claim = self._rewrite(
            nodepool, nodeclaim, lambda c: (None, {r: -int(a) for r, a in c["resources"].items()}),
            "releasing the launch claim")
        if claim is None and nodepool:   # a NodeClaim of no NodePool (a manual one) has no usage item
            released, claim = self._release_legacy(nodepool, nodeclaim)
        for uid in (claim or {}).get("pods", []):
            try:
                self.ddb.delete_item(TableName=self.table, Key=self._reservation_key(uid),
                                     ConditionExpression="nodeClaim = :me",
                                     ExpressionAttributeValues={":me": {"S": nodeclaim}})
            except self.ddb.exceptions.ConditionalCheckFailedException:
                pass
        return released
