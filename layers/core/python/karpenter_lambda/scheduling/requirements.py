"""Requirement algebra with Karpenter v1 semantics (our own implementation).

A :class:`Requirement` is a set of label values for one key, held as

* ``values`` + ``complement``: ``In [a b]`` is ``{a, b}``; ``NotIn [a]`` is the complement of ``{a}``;
  ``Exists`` is the complement of the empty set; ``DoesNotExist`` is the empty set;
* integer bounds ``gt`` / ``lt`` (exclusive): ``Gt 4`` -> ``gt=4``; ``Gte 4`` -> ``gt=3``; ``Lt 8`` -> ``lt=8``;
  ``Lte 8`` -> ``lt=9``.  A value outside the bounds (or not an integer when bounds exist) is not in the set;
* ``min_values``: how many distinct values the surviving instance types must offer.

Intersection is set algebra with the larger lower bound, the smaller upper bound and the larger minValues;
an empty integer range yields ``DoesNotExist``.  :class:`Requirements` maps key -> Requirement and adds
by intersection.  Keys are normalised (``beta.kubernetes.io/arch`` -> ``kubernetes.io/arch``).
"""

from __future__ import annotations

from typing import Iterable

from ..api import labels as L

__all__ = [
    "Requirement",
    "Requirements",
    "RequirementError",
    "IN",
    "NOT_IN",
    "EXISTS",
    "DOES_NOT_EXIST",
    "GT",
    "LT",
    "GTE",
    "LTE",
    "OPERATORS",
]

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
GT, LT, GTE, LTE = "Gt", "Lt", "Gte", "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
_NEGATIVE = (NOT_IN, DOES_NOT_EXIST)
_EMPTY: frozenset = frozenset()


class RequirementError(ValueError):
    """A malformed requirement (unknown operator, missing or non-integer value)."""


def _as_int(v: str) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


class Requirement:
    # ``conflict``: an empty set that requirements excluding each other left (``In [a]`` and ``NotIn [a]``, ``Exists``
    # and ``DoesNotExist``, an empty integer range): no node satisfies it, not even one without the label, where a
    # plain ``DoesNotExist`` is met by such a node.  Karpenter's algebra reads both as DoesNotExist, so a pod asking
    # ``team=b`` and ``team NotIn [b]`` (or whose preferred term contradicts its selector) looked compatible with a
    # NodePool that does not define ``team`` and got a node it could never run on.
    __slots__ = ("key", "complement", "values", "gt", "lt", "min_values", "conflict")

    def __init__(self, key: str, complement: bool, values: Iterable[str] = (), gt: int | None = None,
                 lt: int | None = None, min_values: int | None = None, conflict: bool = False):
        self.key = key
        self.complement = complement
        self.gt = gt
        self.lt = lt
        self.min_values = min_values
        self.conflict = conflict
        vals = values if isinstance(values, frozenset) else frozenset(values)
        if (gt is not None and lt is not None) and gt + 1 >= lt:
            # empty integer range: nothing can satisfy it
            self.complement = False
            self.conflict = True
            vals = _EMPTY
        elif not complement and (gt is not None or lt is not None) and vals:
            vals = frozenset(v for v in vals if self._in_bounds(v))
        self.values = vals

    # -- construction -----------------------------------------------------------------
    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] | None = None, min_values: int | None = None) -> "Requirement":
        """``Requirement.new("kubernetes.io/arch", "In", ["arm64"])``; raises RequirementError on bad input."""
        key = L.normalize_key(key)
        vals = [str(v) for v in (values or [])]
        if operator == IN:
            return cls(key, False, vals, min_values=min_values)
        if operator == NOT_IN:
            return cls(key, True, vals, min_values=min_values)
        if operator == EXISTS:
            return cls(key, True, (), min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, (), min_values=min_values)
        if operator in (GT, LT, GTE, LTE):
            if len(vals) != 1 or _as_int(vals[0]) is None:
                raise RequirementError(f"requirement {key} {operator}: needs exactly one integer value, got {vals}")
            n = int(vals[0])
            if operator == GT:
                return cls(key, True, (), gt=n, min_values=min_values)
            if operator == GTE:
                return cls(key, True, (), gt=n - 1, min_values=min_values)
            if operator == LT:
                return cls(key, True, (), lt=n, min_values=min_values)
            return cls(key, True, (), lt=n + 1, min_values=min_values)
        raise RequirementError(f"requirement {key}: unknown operator {operator!r} (expected one of {', '.join(OPERATORS)})")

    @classmethod
    def from_dict(cls, d: dict) -> "Requirement":
        if not isinstance(d, dict) or "key" not in d or "operator" not in d:
            raise RequirementError(f"requirement {d!r}: needs key and operator")
        return cls.new(d["key"], d["operator"], d.get("values"), d.get("minValues"))

    # -- queries ----------------------------------------------------------------------
    def _in_bounds(self, v: str) -> bool:
        if self.gt is None and self.lt is None:
            return True
        n = _as_int(v)
        if n is None:
            return False
        if self.gt is not None and n <= self.gt:
            return False
        if self.lt is not None and n >= self.lt:
            return False
        return True

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values

    def is_empty(self) -> bool:
        return not self.complement and not self.values

    def __len__(self) -> int:  # complement sets are "infinite"
        return (1 << 62) - len(self.values) if self.complement else len(self.values)

    def any_value(self) -> str | None:
        """A value of the set when it is finite (sorted first) else None."""
        if self.complement or not self.values:
            return None
        return min(self.values)

    def label_value(self) -> str | None:
        """The value a node labelled for this requirement gets (Karpenter's ``Requirement.Any``): an In set's first
        value (sorted: Karpenter takes any), for Exists / NotIn / Gt / Lt an integer within the bounds (Karpenter picks
        one at random; here the smallest not excluded, so a plan is the same every time), None for DoesNotExist or an
        empty range."""
        if not self.complement:
            return min(self.values) if self.values else None
        n = 0 if self.gt is None else max(0, self.gt + 1)
        while str(n) in self.values:
            n += 1
        return None if self.lt is not None and n >= self.lt else str(n)

    @property
    def operator(self) -> str:
        if self.complement:
            if self.values:
                return NOT_IN
            if self.gt is not None:
                return GT
            if self.lt is not None:
                return LT
            return EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def intersection(self, other: "Requirement") -> "Requirement":
        gt = self.gt if other.gt is None else (other.gt if self.gt is None else max(self.gt, other.gt))
        lt = self.lt if other.lt is None else (other.lt if self.lt is None else min(self.lt, other.lt))
        mv = self.min_values if other.min_values is None else (
            other.min_values if self.min_values is None else max(self.min_values, other.min_values))
        conflict = self.conflict or other.conflict
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gt, lt, mv, conflict)
        if self.complement:
            vals = frozenset(v for v in other.values if self.has(v))
        elif other.complement:
            vals = frozenset(v for v in self.values if other.has(v))
        else:
            vals = self.values & other.values
        if not vals and not conflict:
            # empty: a DoesNotExist when both were negative (NotIn / DoesNotExist), else they exclude each other
            conflict = (self.complement or bool(self.values)) or (other.complement or bool(other.values))
            if conflict and (self.operator in _NEGATIVE and other.operator in _NEGATIVE):
                conflict = False
        return Requirement(self.key, False, vals, gt, lt, mv, conflict)

    def to_dict(self) -> dict:
        op = self.operator
        d: dict = {"key": self.key, "operator": op}
        if op in (IN, NOT_IN):
            d["values"] = sorted(self.values)
        elif op == GT:
            d["values"] = [str(self.gt)]
        elif op == LT:
            d["values"] = [str(self.lt)]
        if self.min_values is not None:
            d["minValues"] = self.min_values
        return d

    def __str__(self) -> str:
        if self.conflict:
            return f"{self.key} (requirements that exclude each other)"
        op = self.operator
        if op in (IN, NOT_IN):
            s = f"{self.key} {op} [{' '.join(sorted(self.values))}]"
        elif op == GT:
            s = f"{self.key} Gt {self.gt}" + (f" Lt {self.lt}" if self.lt is not None else "")
        elif op == LT:
            s = f"{self.key} Lt {self.lt}"
        else:
            s = f"{self.key} {op}"
        if self.complement and self.values and (self.gt is not None or self.lt is not None):
            s += f" (bounds gt={self.gt} lt={self.lt})"
        return s

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return (isinstance(other, Requirement) and self.key == other.key and self.complement == other.complement
                and self.values == other.values and self.gt == other.gt and self.lt == other.lt
                and self.min_values == other.min_values and self.conflict == other.conflict)

    def __hash__(self) -> int:
        return hash((self.key, self.complement, self.values, self.gt, self.lt, self.min_values, self.conflict))


class Requirements:
    """key -> Requirement; adding a requirement for a key already present intersects them."""

    # ``_sig``: the signature, computed on first use and dropped by every change (only ``add`` and the constructors
    # below write ``_reqs``): the solver asks a NodeClaim's or a class's signature many times between changes
    __slots__ = ("_reqs", "_sig")

    def __init__(self, reqs: Iterable[Requirement] = ()):
        self._reqs: dict[str, Requirement] = {}
        self._sig = None
        for r in reqs:
            self.add(r)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_list(cls, items: Iterable[dict] | None) -> "Requirements":
        """From NodeSelectorRequirement(-WithMinValues) dicts."""
        return cls(Requirement.from_dict(d) for d in (items or []))

    @classmethod
    def from_labels(cls, labels: dict | None) -> "Requirements":
        """Labels / a nodeSelector as ``In [value]`` requirements."""
        return cls(Requirement.new(k, IN, [str(v)]) for k, v in (labels or {}).items())

    def copy(self) -> "Requirements":
        r = Requirements()
        r._reqs = dict(self._reqs)
        r._sig = self._sig
        return r

    def without(self, *keys: str) -> "Requirements":
        """A copy without the requirements for ``keys`` (a key not present is ignored)."""
        r = Requirements()
        r._reqs = {k: v for k, v in self._reqs.items() if k not in keys}
        return r

    def add(self, req: Requirement) -> "Requirements":
        cur = self._reqs.get(req.key)
        self._reqs[req.key] = req if cur is None else cur.intersection(req)
        self._sig = None
        return self

    def add_all(self, other: "Requirements") -> "Requirements":
        for r in other._reqs.values():
            self.add(r)
        return self

    def intersection(self, other: "Requirements") -> "Requirements":
        return self.copy().add_all(other)

    # -- access -----------------------------------------------------------------------
    def get(self, key: str) -> Requirement:
        """The requirement for ``key``; an undefined key is ``Exists`` (anything goes)."""
        r = self._reqs.get(key)
        return r if r is not None else Requirement(key, True)

    def has(self, key: str) -> bool:
        return key in self._reqs

    def keys(self):
        return self._reqs.keys()

    def values(self):
        return self._reqs.values()

    def __iter__(self):
        return iter(self._reqs.values())

    def __len__(self) -> int:
        return len(self._reqs)

    def __contains__(self, key: str) -> bool:
        return key in self._reqs

    def labels(self) -> dict[str, str]:
        """Labels a node gets from these requirements: every key with exactly one allowed value."""
        out = {}
        for k, r in self._reqs.items():
            if not r.complement and len(r.values) == 1:
                out[k] = next(iter(r.values))
        return out

    def node_labels(self) -> dict[str, str]:
        """The labels a NodeClaim of these requirements carries: :meth:`labels`, and for every other key that is not
        well known (the launch resolves those: zone, instance type, ...) nor in the karpenter.sh domain or the
        hostname, a value it allows (:meth:`Requirement.label_value`) -- Karpenter's
        ``resolveCustomLabelsFromRequirements``: a NodePool's ``team In [a, b]`` or ``tier Exists`` labels the node
        ``team=a`` / ``tier=0``, so it meets its own NodePool's requirements (without, drift found it
        RequirementsDrifted and replaced it over and over)."""
        out = self.labels()
        for k, r in self._reqs.items():
            if k in out or k in L.WELL_KNOWN or k == L.HOSTNAME or L.in_karpenter_domain(k):
                continue
            v = r.label_value()
            if v is not None:
                out[k] = v
        return out

    def to_list(self) -> list[dict]:
        return [self._reqs[k].to_dict() for k in sorted(self._reqs)]

    def signature(self) -> tuple:
        """A hashable key equal for equal requirement sets (computed once until the set changes)."""
        sig = self._sig
        if sig is None:
            sig = self._sig = tuple(sorted((hash(r), k) for k, r in self._reqs.items()))
        return sig

    # -- algebra ----------------------------------------------------------------------
    def intersects(self, other: "Requirements") -> str | None:
        """None when every shared key has a common value, else the first conflict as text.

        Two negative requirements (NotIn / DoesNotExist) never conflict.
        """
        a, b = self._reqs, other._reqs
        if len(b) < len(a):
            keys = [k for k in b if k in a]
        else:
            keys = [k for k in a if k in b]
        for k in keys:
            mine, inc = a[k], b[k]
            both = mine.intersection(inc)
            if both.is_empty():
                if both.conflict and (mine.conflict or inc.conflict):
                    return f"{inc if inc.conflict else mine}: no node satisfies them"
                if inc.operator in _NEGATIVE and mine.operator in _NEGATIVE and not both.conflict:
                    continue
                return f"{inc} conflicts with {mine}"
        return None

    def compatible(self, other: "Requirements", well_known=L.WELL_KNOWN) -> str | None:
        """Can a pod requiring ``other`` land on a node described by ``self``?

        A key the node does not define is fine when it is well-known or the pod asks NotIn/DoesNotExist;
        otherwise the label "does not have known values" (Karpenter's rule for custom labels).
        """
        for k, inc in other._reqs.items():
            if inc.conflict:
                return f"{inc}: no node satisfies them"
            if k not in self._reqs and k not in well_known and inc.operator not in _NEGATIVE:
                return f"label {k} does not have known values"
        return self.intersects(other)

    def __str__(self) -> str:
        return ", ".join(str(self._reqs[k]) for k in sorted(self._reqs))

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, Requirements) and self._reqs == other._reqs


def node_selector_term(term: dict | None) -> Requirements:
    """A NodeSelectorTerm (matchExpressions; matchFields on metadata.name is ignored) as Requirements."""
    return Requirements.from_list((term or {}).get("matchExpressions"))
