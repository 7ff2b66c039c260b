"""The authority's decisions on a fixed clock: issue, renew at two thirds, rotate the CA
with the old and new CA published before any leaf switches."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from certs.authority import Plan, Policy, Step, apply_step, awaiting_replicas, next_step
from certs.build import issue_serving, new_ca, renew_at, service_dns_names, signed_by
from certs.reports import Replicas, leaf_fingerprint
from certs.store import Stored
from tests.certs.conftest import NAMESPACE, NOW, SERVICE

DAY = datetime.timedelta(days=1)
POLICY = Policy(dns_names=tuple(service_dns_names(SERVICE, NAMESPACE)))


def everyone_serves(stored: Stored) -> Replicas:
    """Two replicas taking traffic, both reporting the Secret's leaf."""
    assert stored.serving is not None
    fingerprint = leaf_fingerprint(stored.serving.cert)
    return Replicas(frozenset({"a", "b"}), {"a": fingerprint, "b": fingerprint})


def settle(stored: Stored, now: datetime.datetime) -> tuple[Stored, list[Step], Plan]:
    """Apply steps as the leader does in one round (publishing succeeds at once, and every
    replica serves a new leaf as soon as it is written)."""
    steps: list[Step] = []
    for _ in range(10):
        replicas = everyone_serves(stored) if awaiting_replicas(stored) else None
        plan = next_step(stored, now, POLICY, replicas)
        if plan.step == "wait":
            return stored, steps, plan
        steps.append(plan.step)
        stored = apply_step(plan.step, stored, now, POLICY)
    raise AssertionError(f"did not settle: {steps}")


def test_an_empty_secret_gets_a_ca_a_leaf_and_a_published_bundle() -> None:
    stored, steps, plan = settle(Stored(), NOW)
    assert steps == ["create", "publish"]
    assert stored.ca is not None and stored.serving is not None
    assert stored.bundle == (stored.ca.cert,)
    assert signed_by(stored.serving.cert, stored.ca.cert)
    assert stored.published and stored.published_at == NOW
    assert plan.wait_until == renew_at(stored.serving.cert)


def test_nothing_happens_before_two_thirds_of_the_leaf_lifetime() -> None:
    stored, _, plan = settle(Stored(), NOW)
    assert plan.wait_until is not None
    just_before = plan.wait_until - datetime.timedelta(seconds=1)
    assert settle(stored, just_before)[1] == []
    renewed, steps, _ = settle(stored, plan.wait_until)
    assert steps == ["renew-serving"]
    assert renewed.ca == stored.ca and renewed.bundle == stored.bundle
    assert renewed.serving is not None and renewed.serving != stored.serving


def test_a_full_decade_renews_leaves_and_rotates_the_ca_without_an_untrusted_moment() -> None:
    """Walk 12 years an hour at a time around each deadline and check the invariant the API
    server needs: the served leaf is always signed by a CA in the published bundle."""
    stored, steps, plan = settle(Stored(), NOW)
    published = stored.bundle
    history: list[tuple[datetime.datetime, Step]] = [(NOW, s) for s in steps]
    now = NOW
    while now < NOW + 12 * 365 * DAY:
        now = plan.wait_until or now + DAY
        while True:
            before = stored
            stored, steps, plan = settle(stored, now)
            for step in steps:
                history.append((now, step))
            if "publish" in steps:
                published = stored.bundle
            assert stored.serving is not None
            assert any(signed_by(stored.serving.cert, ca) for ca in published), (now, steps)
            if stored == before or plan.wait_until is None or plan.wait_until > now:
                break
    names = [step for _, step in history]
    rotation = names.index("start-ca-rotation")
    assert names[rotation : rotation + 5] == [
        "start-ca-rotation",
        "publish",
        "switch-serving",
        "finish-ca-rotation",
        "publish",
    ]
    times = {step: at for at, step in history[rotation : rotation + 5]}
    assert times["switch-serving"] - times["start-ca-rotation"] == POLICY.propagation
    # The replicas report at once here, so nothing waits for the clock after the switch.
    assert times["finish-ca-rotation"] == times["switch-serving"]
    assert (
        times["start-ca-rotation"]
        == NOW
        - datetime.timedelta(minutes=5)
        + (3650 * DAY + datetime.timedelta(minutes=5)) * 2 / 3
    )
    # A leaf lasts a year and is renewed every ~243 days; the CA rotates after ~2433 days.
    assert names[:rotation].count("renew-serving") == 10


def _rotating() -> tuple[Stored, datetime.datetime]:
    """A Secret whose CA has just been rotated and the bundle published at ``NOW``."""
    old = new_ca(NOW - 3000 * DAY)
    leaf = issue_serving(old, list(POLICY.dns_names), NOW - 10 * DAY)
    steady = Stored(ca=old, bundle=(old.cert,), serving=leaf)
    started = apply_step("start-ca-rotation", steady, NOW, POLICY)
    return apply_step("publish", started, NOW, POLICY), NOW


def test_leaves_switch_to_the_new_ca_only_after_the_bundle_has_propagated() -> None:
    stored, published_at = _rotating()
    assert stored.ca is not None and stored.serving is not None
    assert len(stored.bundle) == 2
    assert not signed_by(stored.serving.cert, stored.ca.cert)
    plan = next_step(stored, published_at + datetime.timedelta(seconds=119), POLICY)
    assert plan == Plan(
        "wait",
        "waiting for the new CA bundle to reach every API server",
        published_at + POLICY.propagation,
    )
    assert next_step(stored, published_at + POLICY.propagation, POLICY).step == "switch-serving"


def _switched() -> tuple[Stored, datetime.datetime, str, str]:
    """A rotation whose leaf has just switched to the new CA: (stored, when, new, old)."""
    stored, published_at = _rotating()
    assert stored.serving is not None
    old = leaf_fingerprint(stored.serving.cert)
    switched_at = published_at + POLICY.propagation
    stored = apply_step("switch-serving", stored, switched_at, POLICY)
    assert stored.serving is not None and awaiting_replicas(stored)
    return stored, switched_at, leaf_fingerprint(stored.serving.cert), old


def test_the_old_ca_leaves_the_bundle_once_every_replica_taking_traffic_serves_the_new_leaf() -> (
    None
):
    stored, switched_at, new, old = _switched()
    soon = switched_at + datetime.timedelta(seconds=1)
    ready = frozenset({"a", "b"})
    assert next_step(stored, soon, POLICY, Replicas(ready, {"a": new, "b": new})).step == (
        "finish-ca-rotation"
    )
    # A replica that is not ready takes no traffic, whatever it serves.
    not_ready = Replicas(frozenset({"a"}), {"a": new, "c": old}, frozenset({"a", "c"}))
    assert next_step(stored, soon, POLICY, not_ready).step == "finish-ca-rotation"
    finished = apply_step("finish-ca-rotation", stored, soon, POLICY)
    assert finished.ca is not None
    assert finished.bundle == (finished.ca.cert,)
    assert not finished.published  # the shorter bundle is published next


@pytest.mark.parametrize(
    ("replicas", "lagging", "reason"),
    [
        (Replicas(frozenset({"a", "b"}), {"a": "NEW", "b": "OLD"}), ("b",), "b"),
        (Replicas(frozenset({"a", "b"}), {"a": "NEW"}), ("b",), "b"),
        (Replicas(frozenset({"address/10.0.0.9", "a"}), {"a": "NEW"}), ("address/10.0.0.9",), ""),
        (Replicas(frozenset(), {"a": "NEW"}), (), "no ready endpoint"),
        (None, (), "could not be read"),
    ],
)
@pytest.mark.parametrize("late", [False, True])
def test_a_replica_that_does_not_report_the_new_leaf_holds_the_old_ca_in(
    replicas: Replicas | None, lagging: tuple[str, ...], reason: str, late: bool
) -> None:
    stored, switched_at, new, old = _switched()
    if replicas is not None:
        names = {"NEW": new, "OLD": old}
        replicas = dataclasses.replace(
            replicas, serving={pod: names[fp] for pod, fp in replicas.serving.items()}
        )
    due = switched_at + POLICY.propagation
    now = due + 30 * DAY if late else due - datetime.timedelta(seconds=1)
    plan = next_step(stored, now, POLICY, replicas)
    assert plan.step == "wait"
    assert plan.lagging == lagging
    assert plan.overdue is late
    assert plan.wait_until == (None if late else due)
    assert "keeping the old CA" in plan.reason and reason in plan.reason


def test_an_unpublished_bundle_is_published_before_anything_else() -> None:
    stored, _ = _rotating()
    unpublished = dataclasses.replace(stored, published_at=None)
    assert next_step(unpublished, NOW + DAY, POLICY).step == "publish"


@pytest.mark.parametrize(
    ("damage", "step"),
    [
        ("no-ca", "create"),
        ("leaf-as-ca", "create"),
        ("expired-ca", "create"),
        ("ca-not-in-bundle", "trust-ca"),
        ("no-leaf", "issue-serving"),
        ("leaf-for-other-service", "issue-serving"),
        ("leaf-from-unknown-ca", "issue-serving"),
        ("expired-leaf", "issue-serving"),
    ],
)
def test_damaged_secrets_are_repaired_with_the_smallest_step(damage: str, step: Step) -> None:
    stored, _, _ = settle(Stored(), NOW)
    ca, serving = stored.ca, stored.serving
    assert ca is not None and serving is not None
    now = NOW
    match damage:
        case "no-ca":
            stored = dataclasses.replace(stored, ca=None)
        case "leaf-as-ca":
            stored = dataclasses.replace(stored, ca=stored.serving)
        case "expired-ca":
            now = ca.not_after
        case "ca-not-in-bundle":
            stored = dataclasses.replace(stored, bundle=(new_ca(NOW).cert,))
        case "no-leaf":
            stored = dataclasses.replace(stored, serving=None)
        case "leaf-for-other-service":
            other = issue_serving(ca, ["other.ns.svc"], NOW)
            stored = dataclasses.replace(stored, serving=other)
        case "leaf-from-unknown-ca":
            foreign = issue_serving(new_ca(NOW), list(POLICY.dns_names), NOW)
            stored = dataclasses.replace(stored, serving=foreign)
        case "expired-leaf":
            now = serving.not_after
    assert next_step(stored, now, POLICY).step == step
    repaired, _, plan = settle(stored, now)
    assert plan.step == "wait"
    assert repaired.ca is not None and repaired.serving is not None
    assert signed_by(repaired.serving.cert, repaired.ca.cert)
    assert repaired.ca.cert in repaired.bundle


def test_trusting_a_missing_ca_keeps_the_cas_already_trusted() -> None:
    stored, _, _ = settle(Stored(), NOW)
    assert stored.ca is not None
    other = new_ca(NOW).cert
    repaired = apply_step("trust-ca", dataclasses.replace(stored, bundle=(other,)), NOW, POLICY)
    assert repaired.bundle == (other, stored.ca.cert)
