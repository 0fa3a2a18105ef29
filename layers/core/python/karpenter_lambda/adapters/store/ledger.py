"""In-flight disruptions, recorded conditionally so concurrent sweeps never together exceed a budget.

One item per NodePool in the **state table** (next to the launch claims; the store never lists it):
``pk = <cluster>#DisruptionInFlight``, ``sk = <nodepool>``, ``n`` = how many NodeClaims of the NodePool a sweep is
disrupting, and one ``e:<nodeclaim>`` attribute per NodeClaim with its entry (JSON: reason, sweep, state, times,
replacements, ...).

* :meth:`DisruptionLedger.reserve` adds an entry in ONE conditional update: ``attribute_not_exists(e:<nc>)`` AND
  ``n <= :max`` where ``:max`` = the budget's node limit - the nodes disrupted outside the ledger (NotReady,
  deleted by hand, interrupted) - 1 (``disruption.budgets.reservation_limit``: the one allowance rule).  Two sweeps planning on the same snapshot both pass their own check, but only
  one of two writes racing for the last slot succeeds.
* :meth:`DisruptionLedger.advance` rewrites an entry (its state machine step), conditional on it still existing.
* :meth:`DisruptionLedger.release` removes it and decrements ``n``, conditional on it existing (idempotent).

An entry lives from the proposal until its NodeClaim is gone (a sweep releases entries whose NodeClaim no longer
exists), so a disruption counts against its budget for its whole life, as in Karpenter.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .tables import state_table_name

LEDGER_KIND = "DisruptionInFlight"
PROPOSED, REPLACING, DELETING = "proposed", "replacing", "deleting"


@dataclass
class Entry:
    nodeclaim: str
    nodepool: str
    reason: str                       # Empty | Drifted | Underutilized
    sweep: str                        # drift | consolidation
    state: str = PROPOSED             # proposed -> replacing -> deleting
    proposed_at: float = 0.0
    planned_price: float | None = None  # $/h of the replacements when planned (a higher price cancels)
    replacements: list[str] = field(default_factory=list)
    savings_per_hour: float = 0.0
    detail: str = ""
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    since: float = 0.0                # when the current state began
    command: str = ""                 # the command this entry belongs to (several candidates share one)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Entry":
        d = json.loads(text)
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


class DisruptionLedger:
    def __init__(self, dynamodb_client, cluster: str, table_name: str | None = None):
        self.ddb = dynamodb_client
        self.cluster = cluster
        self.table = state_table_name(table_name)

    def _key(self, nodepool: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{LEDGER_KIND}"}, "sk": {"S": nodepool}}

    def entries(self) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        kwargs: dict = {}
        while True:
            resp = self.ddb.query(TableName=self.table, KeyConditionExpression="pk = :pk",
                                  ExpressionAttributeValues={":pk": {"S": f"{self.cluster}#{LEDGER_KIND}"}},
                                  ConsistentRead=True, **kwargs)
            for item in resp.get("Items", []):
                for k, v in item.items():
                    if k.startswith("e:"):
                        e = Entry.from_json(v["S"])
                        out[e.nodeclaim] = e
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    def reserve(self, entry: Entry, max_before: int | None) -> bool:
        """Record ``entry`` if fewer than or equal to ``max_before`` entries of its NodePool exist (None: no limit).
        False when the budget is used up (or the entry already exists)."""
        names = {"#e": f"e:{entry.nodeclaim}", "#n": "n"}
        values = {":e": {"S": entry.to_json()}, ":one": {"N": "1"}, ":zero": {"N": "0"}}
        cond = "attribute_not_exists(#e)"
        if max_before is not None:
            if max_before < 0:
                return False
            values[":max"] = {"N": str(int(max_before))}
            cond += " AND (attribute_not_exists(#n) OR #n <= :max)"
        try:
            self.ddb.update_item(TableName=self.table, Key=self._key(entry.nodepool),
                                 UpdateExpression="SET #e = :e, #n = if_not_exists(#n, :zero) + :one",
                                 ConditionExpression=cond, ExpressionAttributeNames=names, ExpressionAttributeValues=values)
            return True
        except self.ddb.exceptions.ConditionalCheckFailedException:
            return False

    def advance(self, entry: Entry) -> bool:
        try:
            self.ddb.update_item(TableName=self.table, Key=self._key(entry.nodepool), UpdateExpression="SET #e = :e",
                                 ConditionExpression="attribute_exists(#e)",
                                 ExpressionAttributeNames={"#e": f"e:{entry.nodeclaim}"},
                                 ExpressionAttributeValues={":e": {"S": entry.to_json()}})
            return True
        except self.ddb.exceptions.ConditionalCheckFailedException:
            return False

    def release(self, entry: Entry) -> bool:
        try:
            self.ddb.update_item(TableName=self.table, Key=self._key(entry.nodepool),
                                 UpdateExpression="REMOVE #e SET #n = #n - :one",
                                 ConditionExpression="attribute_exists(#e)",
                                 ExpressionAttributeNames={"#e": f"e:{entry.nodeclaim}", "#n": "n"},
                                 ExpressionAttributeValues={":one": {"N": "1"}})
            return True
        except self.ddb.exceptions.ConditionalCheckFailedException:
            return False
