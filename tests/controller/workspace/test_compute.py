"""``spec.resources`` → the workspace container's requests and limits."""

from __future__ import annotations

from typing import Any

import pytest

from controller.workspace.pod.compute import ResourcesError, container_resources


def resources(**given: Any) -> dict[str, Any]:
    return container_resources({"resources": given} if given else {})


def test_a_workspace_without_resources_gets_the_defaults_and_four_times_as_limits() -> None:
    assert resources() == {
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "2000m", "memory": "2048Mi"},
    }


def test_the_workspace_shape_maps_to_requests_and_limits() -> None:
    assert resources(cpu="1.5", memory="1Gi", cpuLimit="3.0", memoryLimit="2Gi") == {
        "requests": {"cpu": "1.5", "memory": "1Gi"},
        "limits": {"cpu": "3.0", "memory": "2Gi"},
    }


def test_an_absent_limit_is_four_times_the_request_in_its_unit() -> None:
    assert resources(cpu="1.5", memory="1Gi")["limits"] == {"cpu": "6", "memory": "4Gi"}


def test_the_kubernetes_shape_is_read_too() -> None:
    got = resources(requests={"cpu": "250m"}, limits={"memory": "1Gi"})
    assert got == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"cpu": "1000m", "memory": "1Gi"},
    }


def test_the_workspace_shape_wins_over_the_kubernetes_shape_for_the_same_quantity() -> None:
    got = resources(cpu="2.0", requests={"cpu": "100m", "memory": "256Mi"}, memoryLimit="1Gi")
    assert got["requests"] == {"cpu": "2.0", "memory": "256Mi"}
    got = resources(cpuLimit="3.0", limits={"cpu": "1.0"})
    assert got["limits"]["cpu"] == "3.0"


def test_a_limit_below_the_default_request_lowers_the_request() -> None:
    got = resources(cpuLimit="200m", memoryLimit="256Mi")
    assert got["requests"] == {"cpu": "200m", "memory": "256Mi"}


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ({"cpu": "2.0", "cpuLimit": "1.0"}, "spec.resources.cpuLimit '1.0' is below"),
        ({"memory": "lots"}, "spec.resources.memory 'lots' is not a quantity"),
        ({"requests": "1"}, "spec.resources.requests must be an object"),
    ],
)
def test_unusable_resources_fail_naming_the_field(given: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ResourcesError) as caught:
        resources(**given)
    assert fragment in str(caught.value)
