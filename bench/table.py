"""One row per figure: what was measured, the ratio to its baseline, the goal, the raw numbers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    name: str
    ratio: float
    goal: str
    detail: str


def render(rows: list[Row]) -> str:
    width = max(len(r.name) for r in rows)
    lines = [f"{'figure':{width}}  {'ratio':>7}  {'goal':>7}  detail", "-" * (width + 40)]
    lines += [f"{r.name:{width}}  {r.ratio:7.2f}  {r.goal:>7}  {r.detail}" for r in rows]
    return "\n".join(lines)
