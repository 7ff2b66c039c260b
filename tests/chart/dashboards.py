"""The Grafana dashboards as the chart renders them, and their panels' queries made concrete.

A query names Grafana variables (``$namespace``, ``$artifact``) and interval macros
(``$__rate_interval``); ``queries`` replaces each with a value it can take, so Prometheus's
parser sees exactly what Grafana would send.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.chart.helm import CHART, Rendered

FILES = CHART / "files" / "dashboards"
SCHEMAS = CHART.parents[1] / "tests" / "chart" / "grafana"
CONFIGMAP = "wspin-dashboards"
# Grafana's own interval macros, with the values a 6-hour range at 30 s resolution gives.
MACROS = {"__rate_interval": "2m", "__interval": "30s", "__range": "6h"}
SAMPLE_VALUES = {"namespace": "wspin", "user": "alice|bob"}
"""A value each query variable can take (``user``: a multi-value selection, as Grafana sends
it to a ``=~`` matcher)."""
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def rendered_dashboards(rendered: Rendered) -> dict[str, dict[str, Any]]:
    """File name → dashboard, from the rendered ConfigMap."""
    config_map = rendered.get("ConfigMap", CONFIGMAP)
    return {
        key.removeprefix("wspin-"): json.loads(text) for key, text in config_map["data"].items()
    }


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []


def variable_values(dashboard: dict[str, Any]) -> dict[str, str]:
    """A value each of the dashboard's variables can take, and Grafana's interval macros."""
    values = dict(MACROS)
    for variable in dashboard["templating"]["list"]:
        name = variable["name"]
        if variable["type"] == "custom":
            values[name] = variable["query"].split(",")[0]
        elif name in SAMPLE_VALUES:
            values[name] = SAMPLE_VALUES[name]
    return values


@dataclass(frozen=True)
class Query:
    dashboard: str
    panel: str
    ref: str
    expr: str
    """With every variable replaced."""
    raw: str


def concrete(expr: str, values: dict[str, str]) -> str:
    """``expr`` with each variable replaced by its value; an unknown variable fails."""

    def value(match: re.Match[str]) -> str:
        variable = match.group(1) or match.group(2)
        if variable not in values:
            raise AssertionError(f"${variable} in {expr!r} is not a variable of the dashboard")
        return values[variable]

    return _VARIABLE.sub(value, expr)


def queries(dashboards: dict[str, dict[str, Any]]) -> list[Query]:
    found = []
    for name, dashboard in dashboards.items():
        values = variable_values(dashboard)
        for panel in panels(dashboard):
            for target in panel.get("targets") or []:
                raw = target["expr"]
                found.append(
                    Query(name, panel["title"], target["refId"], concrete(raw, values), raw)
                )
    return found
