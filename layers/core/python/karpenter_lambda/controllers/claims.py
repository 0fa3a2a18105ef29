"""Launch claims: the provisioner's guard against duplicate launches and limit overshoot.

Two kinds of items live in the **state table** next to the store's objects (same ``pk``/``sk`` keys,
different ``pk`` prefixes, so the store never lists them):

* **NodePool usage** -- ``pk = <cluster>#NodePoolUsage``, ``sk = <nodepool>``.  Top-level attributes
  ``usage:<resource>`` (numbers: cpu in millicores, memory bytes, ``nodes`` count, ...) hold the total
  counted against the NodePool's ``limits``, and one ``claim:<nodeclaim>`` attribute per NodeClaim holds
  what that NodeClaim contributes (JSON: resources, pod uids, time).  Adding a NodeClaim is ONE conditional
  update: ``attribute_not_exists(claim:<name>)`` (the same plan delivered twice is refused) AND, per limited
  resource, ``usage:<r> <= limit - request`` (concurrent provisioners can never exceed a limit).
  Releasing is the inverse, conditional on the claim attribute existing, so it is idempotent.

* **Pod reservations** -- ``pk = <cluster>#PodReservation``, ``sk = <pod uid>``, ``nodeClaim``, ``expiresAt``
  and ``ttl`` (epoch seconds).  A pod can be reserved by one NodeClaim at a time: the put is conditional
  on no live reservation by another NodeClaim.

Both go into ONE ``TransactWriteItems`` per NodeClaim, so a plan either holds its pods and its share of
the limits, or nothing.  The cancellation reasons tell the caller which part failed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_STATE_TABLE = "karpenter-lambda-state"
RESERVATION_TTL_SECONDS = 20 * 60  # longer than launch + the 15 min registration timeout
USAGE_KIND = "NodePoolUsage"
RESERVATION_KIND = "PodReservation"


def _attr_name(prefix: str, key: str) -> str:
    return f"{prefix}:{key}"


@dataclass
class CommitResult:
    ok: bool
    duplicate: bool = False          # the NodeClaim was already claimed (same plan delivered twice)
    limit_exceeded: bool = False     # the NodePool's limits would be exceeded
    taken_pods: list[str] = field(default_factory=list)   # pod uids reserved by another NodeClaim
    message: str = ""


class LaunchClaims:
    """Conditional writes on the state table (boto3 low-level DynamoDB client)."""

    def __init__(self, dynamodb_client, cluster: str, table_name: str | None = None,
                 clock: Callable[[], float] = time.time, reservation_ttl: int = RESERVATION_TTL_SECONDS):
        self.ddb = dynamodb_client
        self.cluster = cluster
        self.table = table_name or os.environ.get("KARPENTER_LAMBDA_STATE_TABLE", DEFAULT_STATE_TABLE)
        self.clock = clock
        self.reservation_ttl = reservation_ttl

    # -- keys ------------------------------------------------------------------------------------
    def _usage_key(self, nodepool: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{USAGE_KIND}"}, "sk": {"S": nodepool}}

    def _reservation_key(self, uid: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{RESERVATION_KIND}"}, "sk": {"S": uid}}

    # -- reads -----------------------------------------------------------------------------------
    def usage(self, nodepool: str) -> tuple[dict[str, int], dict[str, dict]]:
        """(totals per resource, claims by NodeClaim name) for one NodePool."""
        item = self.ddb.get_item(TableName=self.table, Key=self._usage_key(nodepool), ConsistentRead=True).get("Item") or {}
        totals: dict[str, int] = {}
        claims: dict[str, dict] = {}
        for k, v in item.items():
            if k.startswith("usage:"):
                totals[k[len("usage:"):]] = int(v["N"])
            elif k.startswith("claim:"):
                claims[k[len("claim:"):]] = json.loads(v["S"])
        return totals, claims

    def all_usage(self) -> dict[str, tuple[dict[str, int], dict[str, dict]]]:
        out = {}
        for item in self._query(f"{self.cluster}#{USAGE_KIND}"):
            totals, claims = {}, {}
            for k, v in item.items():
                if k.startswith("usage:"):
                    totals[k[len("usage:"):]] = int(v["N"])
                elif k.startswith("claim:"):
                    claims[k[len("claim:"):]] = json.loads(v["S"])
            out[item["sk"]["S"]] = (totals, claims)
        return out

    def reservations(self) -> dict[str, str]:
        """Live reservations: pod uid -> NodeClaim name (expired ones ignored)."""
        now = self.clock()
        out = {}
        for item in self._query(f"{self.cluster}#{RESERVATION_KIND}"):
            if float(item.get("expiresAt", {"N": "0"})["N"]) > now:
                out[item["sk"]["S"]] = item["nodeClaim"]["S"]
        return out

    def _query(self, pk: str) -> list[dict]:
        items, kwargs = [], {}
        while True:
            resp = self.ddb.query(TableName=self.table, KeyConditionExpression="pk = :pk",
                                  ExpressionAttributeValues={":pk": {"S": pk}}, ConsistentRead=True, **kwargs)
            items.extend(resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                return items
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    # -- writes ----------------------------------------------------------------------------------
    def commit(self, nodepool: str, nodeclaim: str, request: dict[str, int], limits: dict[str, int],
               pod_uids: list[str], takeover: dict[str, str] | None = None) -> CommitResult:
        """Atomically: add the NodeClaim's claim to the NodePool usage (within limits) and reserve its pods.

        ``takeover`` (pod uid -> NodeClaim) names pods whose nomination by that NodeClaim no longer protects them
        (its node is initialized or full): their reservation may move here, conditionally on still being that one,
        so two provisioners can never both take the same pod.
        """
        now = self.clock()
        takeover = takeover or {}
        names = {"#c": _attr_name("claim", nodeclaim)}
        values = {":claim": {"S": json.dumps({"resources": request, "pods": pod_uids, "at": now}, sort_keys=True)}}
        sets = ["#c = :claim"]
        conds = ["attribute_not_exists(#c)"]
        for i, (res, amount) in enumerate(sorted(request.items())):
            n, v = f"#u{i}", f":u{i}"
            names[n] = _attr_name("usage", res)
            values[v] = {"N": str(int(amount))}
            sets.append(f"{n} = if_not_exists({n}, :zero) + {v}")
            if res in limits:
                room = int(limits[res]) - int(amount)
                values[f":r{i}"] = {"N": str(room)}
                if room < 0:
                    return CommitResult(ok=False, limit_exceeded=True,
                                        message=f"NodePool {nodepool}: limits {res} {limits[res]} < request {amount}")
                conds.append(f"(attribute_not_exists({n}) OR {n} <= :r{i})")
        values[":zero"] = {"N": "0"}
        items = [{
            "Update": {
                "TableName": self.table, "Key": self._usage_key(nodepool),
                "UpdateExpression": "SET " + ", ".join(sets),
                "ConditionExpression": " AND ".join(conds),
                "ExpressionAttributeNames": names, "ExpressionAttributeValues": values,
            }
        }]
        expires = now + self.reservation_ttl
        for uid in pod_uids:
            cond = "attribute_not_exists(pk) OR nodeClaim = :me OR expiresAt < :now"
            vals = {":me": {"S": nodeclaim}, ":now": {"N": repr(float(now))}}
            if uid in takeover and takeover[uid] != nodeclaim:
                cond += " OR nodeClaim = :prev"
                vals[":prev"] = {"S": takeover[uid]}
            items.append({
                "Put": {
                    "TableName": self.table,
                    "Item": {**self._reservation_key(uid), "nodeClaim": {"S": nodeclaim}, "nodePool": {"S": nodepool},
                             "expiresAt": {"N": repr(float(expires))}, "ttl": {"N": str(int(expires))}},
                    "ConditionExpression": cond,
                    "ExpressionAttributeValues": vals,
                }
            })
        # DynamoDB allows 100 actions per transaction: plans bigger than that reserve their pods in chunks
        # after the usage claim (still conditional, so a pod is never held by two NodeClaims).
        first, rest = items[:100], items[100:]
        try:
            self.ddb.transact_write_items(TransactItems=first)
        except self.ddb.exceptions.TransactionCanceledException as e:
            return self._explain_cancel(e, nodepool, nodeclaim, pod_uids[: len(first) - 1], limits)
        taken = []
        for put in rest:
            try:
                self.ddb.put_item(**put["Put"])
            except self.ddb.exceptions.ConditionalCheckFailedException:
                taken.append(put["Put"]["Item"]["sk"]["S"])
        if taken:
            self.release(nodepool, nodeclaim)
            return CommitResult(ok=False, taken_pods=taken, message=f"{len(taken)} pods reserved by other NodeClaims")
        return CommitResult(ok=True)

    def _explain_cancel(self, err, nodepool, nodeclaim, uids, limits) -> CommitResult:
        reasons = err.response.get("CancellationReasons") or []
        codes = [r.get("Code", "None") for r in reasons]
        usage_failed = bool(codes) and codes[0] == "ConditionalCheckFailed"
        taken = [uid for uid, code in zip(uids, codes[1:]) if code == "ConditionalCheckFailed"]
        if not codes:  # no reasons reported: find out by reading
            totals, claims = self.usage(nodepool)
            if nodeclaim in claims:
                return CommitResult(ok=False, duplicate=True, message=f"NodeClaim {nodeclaim} already claimed")
            live = self.reservations()
            taken = [u for u in uids if live.get(u, nodeclaim) != nodeclaim]
            usage_failed = not taken
        if usage_failed:
            totals, claims = self.usage(nodepool)
            if nodeclaim in claims:
                return CommitResult(ok=False, duplicate=True, message=f"NodeClaim {nodeclaim} already claimed")
            over = [f"{r} {totals.get(r, 0)}/{lim}" for r, lim in sorted(limits.items())]
            return CommitResult(ok=False, limit_exceeded=True, taken_pods=taken,
                                message=f"NodePool {nodepool}: limits reached (usage {', '.join(over)})")
        return CommitResult(ok=False, taken_pods=taken, message=f"{len(taken)} pods reserved by other NodeClaims")

    def adjust(self, nodepool: str, nodeclaim: str, actual: dict[str, int]) -> None:
        """Replace a claim's reserved resources by what was really launched (never above the reservation)."""
        totals, claims = self.usage(nodepool)
        claim = claims.get(nodeclaim)
        if claim is None:
            return
        old = claim.get("resources", {})
        new = {r: min(int(actual.get(r, old[r])), int(old[r])) for r in old}
        names = {"#c": _attr_name("claim", nodeclaim)}
        values = {":old": {"S": json.dumps(claim, sort_keys=True)},
                  ":new": {"S": json.dumps({**claim, "resources": new}, sort_keys=True)}}
        sets = ["#c = :new"]
        for i, r in enumerate(sorted(old)):
            delta = int(old[r]) - new[r]
            if delta:
                names[f"#u{i}"] = _attr_name("usage", r)
                values[f":d{i}"] = {"N": str(delta)}
                sets.append(f"#u{i} = #u{i} - :d{i}")
        try:
            self.ddb.update_item(TableName=self.table, Key=self._usage_key(nodepool), UpdateExpression="SET " + ", ".join(sets),
                                 ConditionExpression="#c = :old", ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        except self.ddb.exceptions.ConditionalCheckFailedException:
            pass  # changed meanwhile (released): nothing to adjust

    def release(self, nodepool: str, nodeclaim: str) -> bool:
        """Remove a NodeClaim's claim from its NodePool's usage and delete its pods' reservations. Idempotent."""
        totals, claims = self.usage(nodepool)
        claim = claims.get(nodeclaim)
        released = False
        if claim is not None:
            res = claim.get("resources", {})
            names = {"#c": _attr_name("claim", nodeclaim)}
            values = {":old": {"S": json.dumps(claim, sort_keys=True)}}
            sets = []
            for i, (r, amount) in enumerate(sorted(res.items())):
                names[f"#u{i}"] = _attr_name("usage", r)
                values[f":d{i}"] = {"N": str(int(amount))}
                sets.append(f"#u{i} = #u{i} - :d{i}")
            expr = ("SET " + ", ".join(sets) + " " if sets else "") + "REMOVE #c"
            try:
                self.ddb.update_item(TableName=self.table, Key=self._usage_key(nodepool), UpdateExpression=expr,
                                     ConditionExpression="#c = :old", ExpressionAttributeNames=names,
                                     ExpressionAttributeValues=values)
                released = True
            except self.ddb.exceptions.ConditionalCheckFailedException:
                return self.release(nodepool, nodeclaim)  # adjusted concurrently: re-read and retry
            uids = claim.get("pods", [])
        else:
            uids = []
        for uid in uids:
            try:
                self.ddb.delete_item(TableName=self.table, Key=self._reservation_key(uid),
                                     ConditionExpression="nodeClaim = :me",
                                     ExpressionAttributeValues={":me": {"S": nodeclaim}})
            except self.ddb.exceptions.ConditionalCheckFailedException:
                pass
        return released
