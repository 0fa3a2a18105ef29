"""The cheapest set of nodes for ``q`` identical pods: a min-cost cover by dynamic programming.

When a group of pods has one request vector (a zone's share of a spread Deployment, or a Deployment alone), each
instance type holds a fixed number of them, and the cheapest set of nodes is an unbounded knapsack: minimise
``sum(price_t * n_t)`` subject to ``sum(fit_t * n_t) >= q``.  The greedy "best value per dollar, repeated" fill is
optimal for large ``q`` but can miss by 10-15% for a few dozen pods (20 pods: 13 + 7 beats 15 + 3 + 2).

Pure: (fit, price) options in, counts per option out.
"""

from __future__ import annotations

__all__ = ["min_cost_cover", "MAX_COVER_PODS"]

MAX_COVER_PODS = 4000  # above this the greedy fill is within a node of optimal and the table would cost time


def min_cost_cover(options: list[tuple[int, float]], q: int) -> list[int] | None:
    """``options``: (pods one node holds, price) per type.  Returns how many nodes of each option host ``q`` pods at
    the least total price (ties: fewer nodes), or None when no option holds a pod or ``q`` is out of range."""
    if q <= 0 or q > MAX_COVER_PODS:
        return None
    # keep, per distinct fit, the cheapest option; drop options a larger, no dearer one dominates
    best_by_fit: dict[int, tuple[float, int]] = {}
    for i, (fit, price) in enumerate(options):
        f = min(fit, q)
        if f <= 0:
            continue
        cur = best_by_fit.get(f)
        if cur is None or price < cur[0]:
            best_by_fit[f] = (price, i)
    items = []
    cheapest_above = None
    for f in sorted(best_by_fit, reverse=True):
        price, i = best_by_fit[f]
        if cheapest_above is not None and price >= cheapest_above:
            continue
        items.append((f, price, i))
        cheapest_above = price if cheapest_above is None else min(cheapest_above, price)
    if not items:
        return None
    inf = float("inf")
    cost = [0.0] + [inf] * q
    nodes = [0] + [0] * q
    pick = [-1] * (q + 1)
    for j in range(1, q + 1):
        bc, bn, bp = inf, 0, -1
        for k, (f, price, _) in enumerate(items):
            prev = j - f if j > f else 0
            c = cost[prev] + price
            n = nodes[prev] + 1
            if c < bc - 1e-12 or (abs(c - bc) <= 1e-12 and n < bn):
                bc, bn, bp = c, n, k
        cost[j], nodes[j], pick[j] = bc, bn, bp
    counts = [0] * len(options)
    j = q
    while j > 0:
        f, _, i = items[pick[j]]
        counts[i] += 1
        j = j - f if j > f else 0
    return counts
