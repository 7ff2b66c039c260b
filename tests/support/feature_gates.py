"""Which feature gates the API server runs with, as it reports them itself.

kube-apiserver publishes every gate in its ``kubernetes_feature_enabled`` metric (the in-repo
server publishes the one it emulates), so a test about a gate follows the server it meets and
the same test holds with the gate on and off.
"""

from __future__ import annotations

import re

from wspin.kube.client import Kube

_METRIC = 'kubernetes_feature_enabled{{name="{gate}"[^}}]*}} (\\S+)$'


async def feature_enabled(kube: Kube, gate: str) -> bool:
    response = await kube.api.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
    )
    try:
        text = await response.text()
    finally:
        response.release()
    found = re.search(_METRIC.format(gate=re.escape(gate)), text, re.MULTILINE)
    assert found, f"the API server's /metrics does not say whether {gate} is on"
    return found.group(1) == "1"


async def image_volume_gate_of(kube: Kube) -> bool:
    return await feature_enabled(kube, "ImageVolume")
