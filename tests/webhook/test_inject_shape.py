"""The injector's typed boundary and size bounds, seen through the admission answer.

A wrong type anywhere the injector reads is a 400 naming the field; a list over its bound is
refused at once naming the bound; a huge but legal pod is answered (in linear time: the figure
of ``bench/large_pods.py``). A hypothesis strategy puts values of every type into every field
the injector reads: the answer is always an encodable AdmissionResponse, never code 500, and
every patch applies and leaves nothing to re-inject.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook.conftest import example_config, load_capture
from webhook import podshape, responses
from webhook.admission import review_pod

CONFIG = example_config()
CAPTURE = load_capture("pod-create-workspace.json")


def request_with(change: Any = None) -> dict[str, Any]:
    request: dict[str, Any] = copy.deepcopy(CAPTURE["request"])
    if change is not None:
        change(request["object"])
    return request


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The response as the API server would decode it (so it must encode)."""
    body = orjson.dumps(responses.review(review_pod(request, CONFIG).response))
    decoded: dict[str, Any] = orjson.loads(body)["response"]
    return decoded


def set_at(pod: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = pod
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


# (path into the pod, value, the field path the denial names)
WRONG_TYPES = [
    (("metadata",), [], "metadata must be an object, got a list"),
    (("metadata", "labels"), "app", "metadata.labels must be an object, got a string"),
    (("metadata", "annotations"), 3, "metadata.annotations must be an object, got a number"),
    (("metadata", "annotations", "x"), {"a": 1}, "metadata.annotations['x'] must be a string"),
    (("metadata", "name"), 7, "metadata.name must be a string, got a number"),
    (("spec",), "x", "spec must be an object, got a string"),
    (("spec", "volumes"), {"name": "v"}, "spec.volumes must be a list, got an object"),
    (("spec", "volumes", 0), None, "spec.volumes[0] must be an object, got null"),
    (("spec", "volumes", 0, "name"), ["w"], "spec.volumes[0].name must be a string, got a list"),
    (("spec", "containers"), 1, "spec.containers must be a list, got a number"),
    (("spec", "containers", 0), "workspace", "spec.containers[0] must be an object"),
    (("spec", "containers", 0, "name"), None, "spec.containers[0].name must be a string, got null"),
    (
        ("spec", "containers", 0, "volumeMounts"),
        5,
        "spec.containers[0].volumeMounts must be a list",
    ),
    (("spec", "containers", 0, "volumeMounts", 0), None, "spec.containers[0].volumeMounts[0] must"),
    (
        ("spec", "containers", 0, "volumeMounts", 0, "mountPath"),
        {},
        "spec.containers[0].volumeMounts[0].mountPath must be a string, got an object",
    ),
    (
        ("spec", "containers", 0, "volumeMounts", 0, "readOnly"),
        "yes",
        "spec.containers[0].volumeMounts[0].readOnly must be a boolean, got a string",
    ),
    (
        ("spec", "containers", 0, "volumeMounts", 0, "subPath"),
        1,
        "spec.containers[0].volumeMounts[0].subPath must be a string, got a number",
    ),
    (("spec", "containers", 0, "env"), {"HOME": "/"}, "spec.containers[0].env must be a list"),
    (("spec", "containers", 0, "env", 0), None, "spec.containers[0].env[0] must be an object"),
    (("spec", "containers", 0, "env", 0, "name"), 1, "spec.containers[0].env[0].name must be"),
    (("spec", "containers", 0, "env", 0, "value"), 1, "spec.containers[0].env[0].value must be"),
    (("spec", "initContainers"), {}, "spec.initContainers must be a list, got an object"),
    (("spec", "initContainers", 0, "volumeMounts"), "x", "spec.initContainers[0].volumeMounts"),
    (("spec", "ephemeralContainers"), [None], "spec.ephemeralContainers[0] must be an object"),
    (
        ("spec", "containers", 0, "volumeDevices"),
        [{"name": "d"}],
        "spec.containers[0].volumeDevices[0].devicePath must be a string, got null",
    ),
]


@pytest.mark.parametrize(("path", "value", "message"), WRONG_TYPES)
def test_a_wrong_type_is_a_400_naming_the_field(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    response = answer(request_with(lambda pod: set_at(pod, path, value)))
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["reason"] == "BadRequest"
    assert message in response["status"]["message"]


def _many(kind: str, count: int) -> Any:
    def change(pod: dict[str, Any]) -> None:
        spec = pod["spec"]
        if kind == "volumes":
            spec["volumes"] = [{"name": f"v{i}", "emptyDir": {}} for i in range(count)]
        elif kind == "volumeMounts":
            spec["containers"][0]["volumeMounts"] = [
                {"name": "workspace", "mountPath": f"/d/{i}"} for i in range(count)
            ]
        elif kind == "volumeDevices":
            spec["containers"][0]["volumeDevices"] = [
                {"name": "workspace", "devicePath": f"/dev/x{i}"} for i in range(count)
            ]
        elif kind == "env":
            spec["containers"][0]["env"] = [{"name": f"E{i}", "value": "x"} for i in range(count)]
        elif kind == "annotations":
            pod["metadata"]["annotations"]["big"] = "x" * count
        else:
            main = spec["containers"][0]
            spec[kind] = [{"name": f"c{i}", "image": "busybox"} for i in range(count)]
            if kind == "containers":
                spec[kind][0] = main

    return change


@pytest.mark.parametrize(
    ("kind", "bound", "message"),
    [
        ("containers", podshape.MAX_CONTAINERS, "spec.containers has {n} entries"),
        ("initContainers", podshape.MAX_CONTAINERS, "spec.initContainers has {n} entries"),
        ("ephemeralContainers", podshape.MAX_CONTAINERS, "spec.ephemeralContainers has {n}"),
        ("volumes", podshape.MAX_VOLUMES, "spec.volumes has {n} entries"),
        ("volumeMounts", podshape.MAX_MOUNTS, "spec.containers[0].volumeMounts has {n} entries"),
        ("volumeDevices", podshape.MAX_MOUNTS, "spec.containers[0].volumeDevices has {n}"),
        ("env", podshape.MAX_ENV, "spec.containers[0].env has {n} entries"),
        ("annotations", podshape.MAX_ANNOTATION_BYTES, "metadata.annotations has"),
    ],
)
def test_each_bound_is_denied_naming_it(kind: str, bound: int, message: str) -> None:
    at_bound = answer(request_with(_many(kind, bound - 200 if kind == "annotations" else bound)))
    assert at_bound["allowed"] is True, at_bound["status"]
    over = answer(request_with(_many(kind, bound + 1)))
    assert over["allowed"] is False
    assert over["status"]["code"] == 400
    assert message.format(n=bound + 1) in over["status"]["message"]
    assert f"accepts at most {bound}" in over["status"]["message"]


def _review(pod_change: Any) -> dict[str, Any]:
    """Decode, review and encode, as the HTTP edge does (its cost is ``bench/large_pods.py``'s
    figure: linear in the pod, as a JSON round trip of it)."""
    return answer(orjson.loads(orjson.dumps(request_with(pod_change))))


def _mounts(ordinary: int, ours_elsewhere: int = 0, ours_duplicate: int = 0) -> Any:
    def change(pod: dict[str, Any]) -> None:
        mounts = pod["spec"]["containers"][0]["volumeMounts"]
        mounts.extend({"name": "workspace", "mountPath": f"/d/{i}"} for i in range(ordinary))
        mounts.extend({"name": "agentd", "mountPath": f"/a/{i}"} for i in range(ours_elsewhere))
        mounts.extend({"name": "agentd", "mountPath": "/agentd"} for _ in range(ours_duplicate))

    return change


def test_a_12000_mount_review_is_answered_with_the_delivery_patch() -> None:
    response = _review(_mounts(12_000))
    assert response["allowed"] is True and response["patch"]


def test_6000_mounts_of_agentd_elsewhere_are_denied_at_the_first() -> None:
    response = _review(_mounts(6_000, ours_elsewhere=6_000))
    assert response["allowed"] is False
    assert "mounts volume 'agentd' at '/a/0'" in response["status"]["message"]


def test_200_duplicate_delivery_mounts_are_removed() -> None:
    response = _review(_mounts(6_000, ours_duplicate=200))
    assert response["allowed"] is True
    pod = request_with(_mounts(6_000, ours_duplicate=200))["object"]
    result = jsonpatch.apply_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
    paths = [m["mountPath"] for m in result["spec"]["containers"][0]["volumeMounts"]]
    assert paths.count("/agentd") == 1 and paths.count("/opencode") == 1


def test_6000_duplicate_delivery_mounts_are_denied_before_the_answer_is_built() -> None:
    """Each duplicate would be a removal: an answer larger than the request, so it is denied."""
    response = _review(_mounts(6_000, ours_duplicate=6_000))
    assert response["allowed"] is False
    assert "delivery edits, more than 512" in response["status"]["message"]


def test_a_deeply_nested_value_never_breaks_the_answer() -> None:
    deep: Any = "x"
    for _ in range(1000):
        deep = [deep]

    def change(pod: dict[str, Any]) -> None:
        env = pod["spec"]["containers"][0]["env"]
        env.append({"name": "LLMSAFESPACES_AGENTD_SHA256_AMD64", "value": "0" * 64, "x": deep})

    response = answer(request_with(change))
    assert response["allowed"] is True
    assert response["patch"]


# -- every field the injector reads, with values of every type -----------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _read_paths(pod: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every path in ``pod`` the injector reads (containers, mounts, env, volumes, metadata)."""
    paths: list[tuple[Any, ...]] = [("metadata",), ("spec",)]
    metadata = pod["metadata"]
    paths += [("metadata", key) for key in ("labels", "annotations", "name", "generateName")]
    paths += [("metadata", "labels", key) for key in metadata.get("labels", {})]
    paths += [("metadata", "annotations", key) for key in metadata.get("annotations", {})]
    spec = pod["spec"]
    for kind in ("volumes", "containers", "initContainers", "ephemeralContainers"):
        paths.append(("spec", kind))
        for i, entry in enumerate(spec.get(kind) or ()):
            paths += [("spec", kind, i), ("spec", kind, i, "name")]
            if kind == "volumes":
                paths += [("spec", kind, i, key) for key in entry if key != "name"]
                continue
            for field in ("volumeMounts", "env", "volumeDevices"):
                paths.append(("spec", kind, i, field))
                for j, item in enumerate(entry.get(field) or ()):
                    paths.append(("spec", kind, i, field, j))
                    paths += [("spec", kind, i, field, j, key) for key in item]
                    paths += [
                        ("spec", kind, i, field, j, key)
                        for key in ("subPath", "subPathExpr", "readOnly", "value")
                    ]
    return paths


def _injected_capture() -> dict[str, Any]:
    pod = copy.deepcopy(CAPTURE["request"]["object"])
    response = answer(request_with())
    injected: dict[str, Any] = jsonpatch.apply_patch(
        pod, orjson.loads(base64.b64decode(response["patch"]))
    )
    return injected


BASES = [(pod, _read_paths(pod)) for pod in (CAPTURE["request"]["object"], _injected_capture())]


@st.composite
def mistyped_pods(draw: st.DrawFn) -> dict[str, Any]:
    base, paths = draw(st.sampled_from(BASES))
    pod: dict[str, Any] = copy.deepcopy(base)
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True)):
        try:
            set_at(pod, path, draw(JSON_VALUES))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced the parent
    return pod


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mistyped_pods())
def test_any_type_in_any_field_gets_an_answer_whose_patch_applies(pod: dict[str, Any]) -> None:
    request = copy.deepcopy(CAPTURE["request"])
    request["object"] = pod
    response = answer(request)
    code = response["status"]["code"]
    assert code == 200 or 400 <= code < 500, response["status"]
    if response["allowed"] is False:
        assert code in (400, 403)
        return
    if "patch" not in response:
        return
    result = jsonpatch.apply_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
    request["object"] = result
    again = answer(request)
    assert again["allowed"] is True
    assert "patch" not in again, again["status"]
