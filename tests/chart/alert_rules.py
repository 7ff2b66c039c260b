"""The alert rules as the chart renders them: the PrometheusRule's groups, and its alerts."""

from __future__ import annotations

from typing import Any

from tests.chart.helm import Rendered


def rule_groups(rendered: Rendered) -> dict[str, dict[str, Any]]:
    """The rendered PrometheusRule's groups by file name (group ``wspin.<file>``)."""
    groups = rendered.one("PrometheusRule")["spec"]["groups"]
    return {str(group["name"]).removeprefix("wspin."): group for group in groups}


def alerts(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {
        rule["alert"]: rule for group in rule_groups(rendered).values() for rule in group["rules"]
    }
