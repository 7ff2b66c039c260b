"""The Grafana dashboards: loaded by Grafana's sidecar, valid for the Grafana schema version
they declare, and every panel query parsed by Prometheus's own parser (promtool).

That each query names only metrics the processes export is proven against their live
/metrics in tests/monitoring/test_exported_metrics.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.chart.dashboards import FILES, SCHEMAS, panels, queries, rendered_dashboards
from tests.chart.helm import Rendered, render
from tests.chart.promql import metric_names
from tests.chart.promtool import run_promtool

DASHBOARDS = sorted(path.name for path in FILES.glob("*.json"))


def schema_for(dashboard: dict[str, Any]) -> dict[str, Any]:
    path = SCHEMAS / f"dashboard-schema-{dashboard['schemaVersion']}.json"
    assert path.is_file(), (
        f"no vendored Grafana schema for schemaVersion {dashboard['schemaVersion']}"
    )
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def test_dashboards_are_off_by_default(default_render: Rendered) -> None:
    assert not [
        c for c in default_render.of_kind("ConfigMap") if "dashboards" in c["metadata"]["name"]
    ]


def test_one_configmap_carries_every_dashboard_with_the_sidecar_label(
    full_render: Rendered,
) -> None:
    config_map = full_render.get("ConfigMap", "wspin-dashboards")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "wspin"}
    assert set(DASHBOARDS) == {
        "admission.json",
        "billing.json",
        "fleet.json",
        "relay.json",
        "rollout.json",
    }
    dashboards = rendered_dashboards(full_render)
    assert sorted(dashboards) == DASHBOARDS
    for name, dashboard in dashboards.items():
        assert dashboard == json.loads((FILES / name).read_text()), name


def test_the_configmap_can_live_where_grafana_looks() -> None:
    rendered = render(
        sets={
            "monitoring.dashboards.enabled": True,
            "monitoring.dashboards.namespace": "monitoring",
        }
    )
    assert rendered.get("ConfigMap", "wspin-dashboards")["metadata"]["namespace"] == "monitoring"


@pytest.mark.parametrize("name", DASHBOARDS)
def test_each_dashboard_validates_against_grafanas_schema_for_its_version(name: str) -> None:
    dashboard = json.loads((FILES / name).read_text())
    jsonschema.Draft7Validator(schema_for(dashboard)).validate(dashboard)


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d.update(rows=[]),  # the pre-5.0 layout
        lambda d: d["panels"][1]["gridPos"].pop("w"),
        lambda d: d["panels"][1].update(targets="up"),
        lambda d: d["templating"]["list"][0].update(type="dropdown"),
    ],
    ids=["unknown-key", "gridpos-without-width", "targets-not-a-list", "unknown-variable-type"],
)
def test_the_schema_refuses_a_broken_dashboard(break_it: Any) -> None:
    dashboard = json.loads((FILES / "fleet.json").read_text())
    broken = copy.deepcopy(dashboard)
    break_it(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema_for(dashboard)).validate(broken)


@pytest.mark.parametrize("name", DASHBOARDS)
def test_each_dashboard_has_a_unique_uid_and_a_tidy_grid(name: str) -> None:
    dashboard = json.loads((FILES / name).read_text())
    assert dashboard["uid"] == "wspin-" + Path(name).stem
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["description"] and panel["targets"], panel["title"]
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_panel_query_parses_with_promtool(full_render: Rendered, tmp_path: Path) -> None:
    found = queries(rendered_dashboards(full_render))
    assert len(found) > 40
    # Each query as a recording rule: promtool parses every expression with Prometheus's parser.
    rules = [{"record": f"wspin:dashboard_query:{n}", "expr": q.expr} for n, q in enumerate(found)]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    result = run_promtool(["check", "rules", "queries.yaml"], tmp_path)
    assert result.returncode == 0, result.output
    assert f"SUCCESS: {len(rules)} rules found" in result.output


def test_a_query_promtool_cannot_parse_fails_the_check(tmp_path: Path) -> None:
    rules = [
        {"record": "wspin:dashboard_query:0", "expr": "sum by (phase (llmsafespaces_workspaces)"}
    ]
    (tmp_path / "queries.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    assert run_promtool(["check", "rules", "queries.yaml"], tmp_path).returncode != 0


def test_every_wspin_query_is_scoped_to_the_chosen_release(full_render: Rendered) -> None:
    for query in queries(rendered_dashboards(full_render)):
        names = metric_names(query.expr)
        ours = {n for n in names if n.startswith(("wspin_", "llmsafespaces_")) or n == "up"}
        if ours:
            assert query.raw.count('namespace="$namespace"') >= len(ours), (query.panel, query.raw)


def test_the_billing_dashboard_reads_every_metering_counter(full_render: Rendered) -> None:
    from prometheus_client import CollectorRegistry

    from controller.workspace.agent.metering import Metering

    registry = CollectorRegistry()
    Metering(registry)
    counters = {family.name + "_total" for family in registry.collect()}
    assert len(counters) == 8
    found = queries(rendered_dashboards(full_render))
    billing = [query for query in found if query.dashboard == "billing.json"]
    named = set().union(*(metric_names(q.expr) for q in billing))
    assert counters <= named, sorted(counters - named)
    for query in billing:  # every figure follows the chosen users, or says it is past the caps
        assert 'user_id=~"$user"' in query.raw or "_overflow" in query.raw, query.panel
