"""Merging analyses of disjoint address ranges of one launch.

A launch whose log or tables do not fit one pass is analysed range by range
(every bucket lies in exactly one range), so the results add up: counts sum, and
each race keeps the example with the lowest order key.
"""

from __future__ import annotations

from dataclasses import replace

from gpurace.model import Race

Order = tuple[int, int, int]


def merge_ranges(parts: list[tuple[list[Race], dict[tuple, Order]]]) -> list[Race]:
    """Combine (races, example order per race key) from each range into one race list."""
    merged: dict[tuple, tuple[Race, Order]] = {}
    for races, orders in parts:
        for race in races:
            order = orders[race.key]
            if race.key not in merged:
                merged[race.key] = (replace(race), order)
                continue
            kept, kept_order = merged[race.key]
            instances = kept.instances + race.instances
            pairs = kept.pairs + race.pairs
            if order < kept_order:
                kept, kept_order = replace(race), order
            kept.instances, kept.pairs = instances, pairs
            merged[race.key] = (kept, kept_order)
    return sorted((race for race, _ in merged.values()), key=lambda r: r.key)
