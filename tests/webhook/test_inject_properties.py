"""Property tests: for any workspace-labelled pod, the patch applies, re-injection is a no-op,
and the result is a valid Pod for the Kubernetes 1.32 schema."""

from __future__ import annotations

from typing import Any

import jsonpatch
import kubernetes_validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook.conftest import example_config
from webhook.inject import inject
from wspin.core.contract import AGENTD, ARCHES, OPENCODE
from wspin.core.errors import AdmissionDenied
from wspin.core.workspace_pod import SIDECAR_COMMAND, WORKSPACE_ARGS, WORKSPACE_COMMAND

CONFIG = example_config()
PIN_NAMES = [
    n
    for a in (AGENTD, OPENCODE)
    for n in (a.marker_env, a.binary_env, *(a.sha256_env(x) for x in ARCHES))
]
DNS = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
HEX = st.text("0123456789abcdef", min_size=64, max_size=64)


@st.composite
def volumes(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(
        st.lists(
            st.sampled_from(["agentd", "opencode", "workspace", "cache", "tmp"]),
            unique=True,
            max_size=4,
        )
    )
    sources = [
        {"emptyDir": {}},
        {"configMap": {"name": "cfg"}},
        {"image": {"reference": "registry.example/x@sha256:" + "e" * 64, "pullPolicy": "Always"}},
    ]
    return [{"name": n, **draw(st.sampled_from(sources))} for n in names]


@st.composite
def containers(
    draw: st.DrawFn, names: list[str], volume_names: list[str], init: bool
) -> list[dict[str, Any]]:
    result = []
    for name in names:
        mounts = []
        paths: set[str] = set()
        for volume in draw(
            st.lists(st.sampled_from(volume_names), unique=True) if volume_names else st.just([])
        ):
            # Our own volumes only at their own path, others elsewhere: anything else is a
            # denial, covered by the golden tests.
            path = "/" + volume if volume in ("agentd", "opencode") else "/data/" + volume
            if path in paths:
                continue
            paths.add(path)
            mount: dict[str, Any] = {"name": volume, "mountPath": path}
            if draw(st.booleans()):
                mount["readOnly"] = draw(st.booleans())
            mounts.append(mount)
        env = [
            {"name": n, "value": draw(st.sampled_from(["1", "true", draw(HEX)]))}
            for n in draw(st.lists(st.sampled_from([*PIN_NAMES, "HOME", "PATH"]), max_size=6))
        ]
        container: dict[str, Any] = {"name": name, "image": "busybox"}
        # The delivered entry points (any other is a denial, covered by the golden tests).
        if name == "workspace" and not init:
            container["command"] = list(WORKSPACE_COMMAND)
            container["args"] = list(draw(st.sampled_from(WORKSPACE_ARGS)))
        elif name == "agentd" and init:
            container["command"] = list(SIDECAR_COMMAND)
        empty_mounts_key, empty_env_key = draw(st.booleans()), draw(st.booleans())
        if mounts or empty_mounts_key:
            container["volumeMounts"] = mounts
        if env or empty_env_key:
            container["env"] = env
        if init and name == "agentd":
            container["restartPolicy"] = "Always"
        result.append(container)
    return result


@st.composite
def workspace_pods(draw: st.DrawFn) -> dict[str, Any]:
    vols = draw(volumes())
    volume_names = [v["name"] for v in vols]
    extra = draw(st.lists(DNS.filter(lambda n: n != "workspace"), unique=True, max_size=3))
    main = draw(containers(["workspace", *extra], volume_names, init=False))
    inits = draw(
        st.lists(
            st.sampled_from(["agentd", "platform-init", "platform-bootstrap", "setup"]),
            unique=True,
            max_size=4,
        )
    )
    init_containers = draw(containers(inits, volume_names, init=True))
    spec: dict[str, Any] = {"containers": main}
    if init_containers:
        spec["initContainers"] = init_containers
    empty_volumes_key = draw(st.booleans())
    if vols or empty_volumes_key:
        spec["volumes"] = vols
    metadata: dict[str, Any] = {
        "name": "ws1-abcdef12",
        "labels": {
            "app": "llmsafespaces",
            "component": "workspace",
            "llmsafespaces.dev/workspace": "ws1",
        },
    }
    if draw(st.booleans()):
        metadata["annotations"] = {"note": "x"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workspace_pods())
def test_patch_applies_is_idempotent_and_yields_a_valid_pod(pod: dict[str, Any]) -> None:
    try:
        injection = inject(pod, CONFIG)
    except AdmissionDenied as denied:
        # The generator keeps to the path rules and the entry points: a denial here would
        # leave the property untested.
        raise AssertionError(f"a generated pod was denied: {denied}") from None
    result = jsonpatch.apply_patch(pod, list(injection.patch))
    again = inject(result, CONFIG)
    assert again.patch == ()
    assert again.warnings == ()
    # Applying the same patch twice must not change the result further.
    assert jsonpatch.apply_patch(result, list(again.patch)) == result
    kubernetes_validate.validate(result, "1.32", strict=True)
    for kind in ("containers", "initContainers"):
        for container in result["spec"].get(kind, []):
            paths = [m["mountPath"] for m in container.get("volumeMounts", [])]
            assert len(paths) == len(set(paths)), container
            if container["name"] == "workspace" and kind == "containers":
                env = [e["name"] for e in container["env"] if e["name"] in PIN_NAMES]
                assert sorted(env) == sorted(PIN_NAMES)
    names = [v["name"] for v in result["spec"]["volumes"]]
    assert len(names) == len(set(names))
