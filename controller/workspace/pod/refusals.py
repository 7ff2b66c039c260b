"""A workspace pod the API server's admission refused: who refused it and why, read from the
answer to the create, and what the Workspace shows of it. Pure.

A webhook that cannot be called (with ``failurePolicy: Fail``), a webhook or a
ValidatingAdmissionPolicy that denies, and Pod Security admission all answer the create with
an error whose message names who refused, in kube-apiserver's fixed wording (k8s.io/apiserver:
the webhook dispatcher's ``failed calling webhook``, ``errors.ToStatusErr``'s ``admission
webhook … denied the request``, the validating policy plugin's ``… with binding … denied
request``; Pod Security's ``violates PodSecurity``), and the built-in plugins refuse it as
``<kind> "<name>" is forbidden: <why>`` (a RuntimeClass not found, a quota exceeded). RBAC's
refusals (``cannot create resource``) and a namespace being deleted are no admission verdict
on the pod and are left to the caller. The Workspace gets ``PodAdmitted=False``
naming them with their words, Ready=False ``PodAdmissionRefused``, and one Warning Event and
one log line per episode (the same refusal by the same webhook or policy). Nothing the
controller watches changes when a webhook comes back or a policy is edited, so the create is
retried after a delay that grows with the episode (half its age, within bounds): a short
outage heals fast, a long one costs the API server little.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from controller.toolkit import episodes
from controller.toolkit.conditions import condition, find_condition
from controller.types import Obj
from wspin.core.clock import parse_time
from wspin.core.errors import WspinError

POD_ADMITTED: Final = "PodAdmitted"
"""Condition type: False while admission refuses the Workspace's pod; removed once it is
created."""
ADMISSION_REFUSED: Final = "PodAdmissionRefused"
"""Ready reason (and ``status.reason``) while admission refuses the pod."""
RETRY_MIN: Final = 2.0
"""Seconds before the first retry of a refused create."""
RETRY_MAX: Final = 300.0
"""Seconds between retries, at most, however long the refusal lasts."""
SCANNED: Final = 16384
"""Characters of the API server's answer read for who refused (it quotes a webhook's own
message, which has no bound of its own); the condition keeps fewer still."""

Reason = Literal[
    "AdmissionWebhookFailed",
    "AdmissionWebhookDenied",
    "AdmissionPolicyDenied",
    "PodSecurity",
    "AdmissionRefused",
]


@dataclass(frozen=True)
class Refusal:
    reason: Reason
    """The kind of refusal: the ``PodAdmitted`` reason and the Event's."""
    by: str
    """Who refused, as the cluster names them (``admission webhook "x"``,
    ``ValidatingAdmissionPolicy 'p' with binding 'b'``, ``Pod Security "restricted:latest"``)."""
    detail: str
    """Their words (or, for a webhook that could not be called, the API server's)."""
    kind: str = "Pod"
    """What was refused: the pod, or what it needs first (its claim, its service account)."""

    @property
    def message(self) -> str:
        what = "the workspace pod" if self.kind == "Pod" else f"the workspace's {self.kind}"
        if self.reason == "AdmissionWebhookFailed":
            return f"{self.by} could not be called, and its failurePolicy refuses {what}: " + (
                self.detail
            )
        return f"{self.by} refused {what}: {self.detail}"


class PodAdmissionRefused(WspinError):
    """Admission refused the create of an object the Workspace owns."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


_FORMS: Final[tuple[tuple[re.Pattern[str], Reason], ...]] = (
    (re.compile(r'failed calling webhook "([^"]{1,253})": ?(.*)', re.S), "AdmissionWebhookFailed"),
    (
        re.compile(r'admission webhook "([^"]{1,253})" denied the request:? ?(.*)', re.S),
        "AdmissionWebhookDenied",
    ),
    (
        re.compile(
            r"(\w{1,64}AdmissionPolicy '[^']{1,253}' with binding '[^']{1,253}') "
            r"denied request: ?(.*)",
            re.S,
        ),
        "AdmissionPolicyDenied",
    ),
    (re.compile(r'violates PodSecurity "([^"]{1,128})": ?(.*)', re.S), "PodSecurity"),
    (re.compile(r'\w{1,64} "[^"]{1,253}" is forbidden: ()(.*)', re.S), "AdmissionRefused"),
)
_NOT_ADMISSION: Final = re.compile(r"cannot create resource|because it is being terminated")


def refusal_of(answer: str, kind: str = "Pod") -> Refusal | None:
    """Who refused the create of a ``kind`` and why, when ``answer`` (an API error's message)
    is an admission refusal."""
    text = answer[:SCANNED]
    if _NOT_ADMISSION.search(text):
        return None
    for form, reason in _FORMS:
        found = form.search(text)
        if found is None:
            continue
        name, detail = found.group(1), found.group(2).strip() or "without explanation"
        if reason == "AdmissionPolicyDenied":
            by = name
        elif reason == "PodSecurity":
            by = f'Pod Security "{name}"'
        elif reason == "AdmissionRefused":
            by = "the API server's admission"
        else:
            by = f'admission webhook "{name}"'
        return Refusal(reason, by, detail, kind)
    return None


def refused_condition(refusal: Refusal, generation: int) -> Obj:
    """``PodAdmitted=False``: who refused and their words (URL credentials stripped, bounded)."""
    return condition(POD_ADMITTED, "False", refusal.reason, refusal.message, generation)


def recorded(refusal: Refusal) -> episodes.Recorded:
    """Whether conditions already record an episode of ``refusal``: the same kind of refusal
    by the same webhook or policy (their words may change within it)."""
    by = f"{refusal.by} "
    return episodes.recorded_as(
        POD_ADMITTED, status="False", reason=refusal.reason, message=lambda m: m.startswith(by)
    )


def retry_delay(conditions: Iterable[Obj], now: datetime) -> float:
    """Seconds until the refused create is tried again: half the episode's age (since
    ``PodAdmitted`` turned False), within ``RETRY_MIN`` and ``RETRY_MAX``."""
    old = find_condition(conditions, POD_ADMITTED)
    started = parse_time(old.get("lastTransitionTime")) if old else None
    if old is None or old.get("status") != "False" or started is None:
        return RETRY_MIN
    return min(RETRY_MAX, max(RETRY_MIN, (now - started).total_seconds() / 2))
