"""``make bench``: run every benchmark and print one table of ratios."""

from __future__ import annotations

from collections.abc import Callable

from bench.agent_scrapes import bench_agent_scrapes
from bench.cli_help import bench_cli_help
from bench.large_pods import bench_large_pod_reviews
from bench.relay_orphans import bench_orphan_sweep
from bench.table import Row, render
from bench.tenant_quota import bench_tenant_quota
from bench.webhook import bench_admission_throughput, bench_injector_cost
from bench.workspaces import bench_workspaces

BENCHMARKS: tuple[Callable[[], list[Row]], ...] = (
    bench_injector_cost,
    bench_large_pod_reviews,
    bench_admission_throughput,
    bench_workspaces,
    bench_orphan_sweep,
    bench_tenant_quota,
    bench_agent_scrapes,
    bench_cli_help,
)


def main() -> None:
    rows: list[Row] = []
    for benchmark in BENCHMARKS:
        rows.extend(benchmark())
    print(render(rows))


if __name__ == "__main__":
    main()
