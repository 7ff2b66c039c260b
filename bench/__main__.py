"""``make bench``: run every benchmark and print one table of ratios."""

from __future__ import annotations

import importlib

from bench.table import Row, render

BENCHMARKS = (
    ("bench.webhook", "bench_injector_cost"),
    ("bench.webhook", "bench_admission_throughput"),
    ("bench.workspaces", "bench_workspaces"),
    ("bench.relay_orphans", "bench_orphan_sweep"),
    ("bench.tenant_quota", "bench_tenant_quota"),
    ("bench.agent_scrapes", "bench_agent_scrapes"),
)


def main() -> None:
    rows: list[Row] = []
    for module, function in BENCHMARKS:
        rows.extend(getattr(importlib.import_module(module), function)())
    print(render(rows))


if __name__ == "__main__":
    main()
