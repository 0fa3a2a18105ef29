"""Zone shares for topology spread: how many of a class's pending pods each domain takes.

Placing a spread pod one at a time (Karpenter's rule: ``count + 1 - min <= maxSkew``, lowest count first) lets a
NodeClaim take only one more pod of the class before the other domains catch up, so a solver that sizes a NodeClaim
when it opens it ends with a node per pod.  The pods of one class are identical, so the order of the one-at-a-time
placement does not matter, only where each pod ends: this module replays that placement on copies of the counts and
returns each domain's share.  The solver then places each share in its domain in bulk (one NodeClaim sized for it, or
the bin packer), and the final counts are exactly those of the one-at-a-time placement, so every intermediate and the
final state keep the skew within maxSkew.

Pure: counts in, shares out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SpreadRule", "domain_shares"]


@dataclass
class SpreadRule:
    """One spread constraint on the key being shared, as it stands before the class is placed."""

    counts: dict[str, int]   # pods matching the constraint's selector per domain (a copy; updated here)
    max_skew: int
    eligible: set[str]       # domains the global minimum is taken over
    min_domains: int | None = None
    member: bool = True      # the class's own pods match the selector (they raise the counts)


def _minimum(rule: SpreadRule) -> int:
    if rule.min_domains and len(rule.eligible) < rule.min_domains:
        return 0
    return min((rule.counts.get(d, 0) for d in rule.eligible), default=0)


def domain_shares(pods: int, domains: list[str], rules: list[SpreadRule]) -> dict[str, int]:
    """Each domain's share of ``pods`` identical pods placed one at a time: a pod goes to the domain with the lowest
    count under the first rule (ties by name) among ``domains`` (those that can host one) where every rule keeps
    ``count + 1 - min <= maxSkew``.  Stops early when no domain is valid (the rest are not given a share)."""
    shares = {d: 0 for d in domains}
    if not rules or not domains:
        return shares
    first = rules[0]
    order = sorted(domains)
    for _ in range(pods):
        mins = [_minimum(r) for r in rules]
        best = None
        best_key = None
        for d in order:
            if all(r.counts.get(d, 0) + 1 - m <= r.max_skew for r, m in zip(rules, mins)):
                k = first.counts.get(d, 0)
                if best_key is None or k < best_key:
                    best, best_key = d, k
        if best is None:
            break
        shares[best] += 1
        for r in rules:
            if r.member:
                r.counts[best] = r.counts.get(best, 0) + 1
    return shares
