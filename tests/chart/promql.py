"""Which metrics a PromQL expression reads, from a parsed syntax tree (``promql-parser``, the
Rust parser's Python binding), never from a regular expression over the text."""

from __future__ import annotations

import promql_parser


def metric_names(expr: str) -> set[str]:
    """Every metric a vector selector in ``expr`` names; a selector without a metric name
    (``{__name__=~"…"}``) fails, since no test could say what it reads."""
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if not node.name:
                raise AssertionError(f"a selector without a metric name in {expr!r}")
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names
