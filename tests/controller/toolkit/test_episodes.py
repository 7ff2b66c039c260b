"""Once per episode (``controller.toolkit.episodes``): the condition test every wing builds
its "already reported" check from, the cached-then-live question, and the in-process memory
the Event recorder keeps."""

from __future__ import annotations

import uuid

from controller.toolkit.conditions import condition
from controller.toolkit.episodes import Seen, is_new, new_episode, recorded_as
from controller.toolkit.status import write_status
from wspin.core.kinds import INFERENCE_RELAYS
from wspin.core.objects import Obj
from wspin.kube.client import Kube

REFUSED = condition("PodAdmitted", "False", "WebhookDenied", 'webhook "a.example" said no')


def test_a_condition_of_the_type_with_everything_asked_records_the_episode() -> None:
    recorded = recorded_as(
        "PodAdmitted",
        status="False",
        reason="WebhookDenied",
        message=lambda text: text.startswith('webhook "a.example" '),
    )
    assert recorded([REFUSED])
    assert not recorded([])
    assert not recorded([{**REFUSED, "status": "True"}])
    assert not recorded([{**REFUSED, "reason": "PolicyDenied"}])
    assert not recorded([{**REFUSED, "message": 'webhook "b.example" said no'}])
    assert not recorded([{**REFUSED, "type": "Ready"}])
    # A hand-written condition without a status or reason records nothing (and raises nothing).
    assert not recorded([{k: v for k, v in REFUSED.items() if k not in ("status", "reason")}])


def test_what_is_not_asked_may_be_anything() -> None:
    assert recorded_as("PodAdmitted")([REFUSED])
    assert recorded_as("PodAdmitted", reason="WebhookDenied")([{**REFUSED, "status": "True"}])


def test_a_message_string_must_be_equal_and_a_missing_message_is_empty_text() -> None:
    exact = recorded_as("PodAdmitted", message='webhook "a.example" said no')
    assert exact([REFUSED])
    assert not exact([{**REFUSED, "message": 'webhook "a.example" said no!'}])
    bare = {k: v for k, v in REFUSED.items() if k != "message"}
    assert not exact([bare])
    assert recorded_as("PodAdmitted", message=lambda text: text == "")([bare])


def test_the_first_condition_of_the_type_decides() -> None:
    recorded = recorded_as("PodAdmitted", status="False")
    assert not recorded([{**REFUSED, "status": "True"}, REFUSED])


def test_an_object_is_asked_through_its_status_conditions() -> None:
    recorded = recorded_as("PodAdmitted", status="False")
    assert is_new({"metadata": {"name": "x"}}, recorded)
    assert is_new({"metadata": {"name": "x"}, "status": None}, recorded)
    assert not is_new({"metadata": {"name": "x"}, "status": {"conditions": [REFUSED]}}, recorded)


def test_seen_remembers_the_last_episodes_and_forgets_the_oldest_first() -> None:
    seen = Seen(limit=3)
    for key in ("a", "b", "c"):
        seen.add(key)
    seen.add("a")  # already there: keeps its place
    assert len(seen) == 3 and "a" in seen
    seen.add("d")
    assert "a" not in seen and all(key in seen for key in ("b", "c", "d"))


async def _relay(kube: Kube) -> Obj:
    spec = {
        "upstreamURL": "https://upstream.example.com",
        "providers": [{"provider": "aws", "region": "us-east-1", "credentialsRef": {"name": "c"}}],
    }
    body = {"metadata": {"name": f"episodes-{uuid.uuid4().hex[:8]}"}, "spec": spec}
    return await kube.create(INFERENCE_RELAYS, body)


async def test_an_episode_the_live_status_records_is_not_new_though_the_cache_lags(
    kube: Kube,
) -> None:
    cached = await _relay(kube)
    name = cached["metadata"]["name"]
    recorded = recorded_as("Ready", status="False", reason="Broken")
    try:
        assert await new_episode(kube, INFERENCE_RELAYS, cached, recorded)
        broken = condition("Ready", "False", "Broken", "it broke")
        stamped = {**broken, "lastTransitionTime": "2026-12-06T10:00:00Z"}
        await write_status(kube, INFERENCE_RELAYS, cached, {"conditions": [stamped]})
        # ``cached`` is what the pass read before the write: the live object answers.
        assert is_new(cached, recorded)
        assert not await new_episode(kube, INFERENCE_RELAYS, cached, recorded)
        assert await new_episode(kube, INFERENCE_RELAYS, cached, recorded_as("Ready", reason="X"))
    finally:
        await kube.delete(INFERENCE_RELAYS, name)


async def test_an_object_gone_has_no_new_episode(kube: Kube) -> None:
    cached = await _relay(kube)
    await kube.delete(INFERENCE_RELAYS, cached["metadata"]["name"])
    assert not await new_episode(kube, INFERENCE_RELAYS, cached, recorded_as("Ready"))
