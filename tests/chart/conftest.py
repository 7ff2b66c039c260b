"""Session-scoped chart renders: each values set is rendered once and shared by every test."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.chart.helm import PINS, Rendered, render

PROVIDED_CA = "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ=="

# name → (values files, --set overrides). Every test that takes `any_render` runs over all.
VALUE_SETS: Mapping[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "selfManaged": (("minimal.yaml",), {}),
    "certManager": (("minimal.yaml",), {"certificates.mode": "certManager"}),
    "certManager-issuer": (
        ("minimal.yaml",),
        {
            "certificates.mode": "certManager",
            "certificates.certManager.issuerRef.kind": "ClusterIssuer",
            "certificates.certManager.issuerRef.name": "internal-ca",
        },
    ),
    "provided": (
        ("minimal.yaml",),
        {
            "certificates.mode": "provided",
            "certificates.secretName": "my-webhook-tls",
            "certificates.caBundle": PROVIDED_CA,
        },
    ),
    "full": (("minimal.yaml", "full.yaml"), {}),
}


class RenderCache:
    def __init__(self) -> None:
        self._renders: dict[str, Rendered] = {}

    def __getitem__(self, name: str) -> Rendered:
        if name not in self._renders:
            values, sets = VALUE_SETS[name]
            self._renders[name] = render(values, sets)
        return self._renders[name]


@pytest.fixture(scope="session")
def renders() -> RenderCache:
    return RenderCache()


@pytest.fixture(params=list(VALUE_SETS))
def any_render(request: pytest.FixtureRequest, renders: RenderCache) -> Rendered:
    """The chart rendered with each values set in turn."""
    rendered: Rendered = renders[request.param]
    return rendered


@pytest.fixture
def default_render(renders: RenderCache) -> Rendered:
    """Default values plus the two mandatory images (certificates.mode selfManaged)."""
    return renders["selfManaged"]


@pytest.fixture
def full_render(renders: RenderCache) -> Rendered:
    """Every optional part enabled."""
    return renders["full"]


@pytest.fixture(scope="module")
def pinned() -> Rendered:
    """The release the admission captures were made with (its pins set), for the policy tests."""
    return render(("minimal.yaml",), PINS)
