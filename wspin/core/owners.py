"""Who owns a Workspace, as admission verified it. Pure.

``spec.owner`` (``userID``, ``orgID``) is a field its writer types, so it proves nothing by
itself. Who wrote is what the API server tells admission (``request.userInfo``): the owner is
believed as written only from a *trusted writer* (the platform's API service account, a group
the operator names, cluster administrators); anyone else may name only themselves (an empty
``userID`` or their own username) and their Namespace's organisation, and may never change the
owner once the Workspace exists.

The webhook writes what it verified into one annotation on the Workspace
(``llmsafespaces.dev/verified-owner``), computed from the review on every CREATE and UPDATE and
re-checked by the validator after every other mutation, so nothing but this computation can
set it. The controller, the tenant quota (through the pod labels the controller derives from
it) and relay staging read the record, never the spec.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from wspin.core.errors import ConfigError

ANNOTATION_VERIFIED_OWNER: Final = "llmsafespaces.dev/verified-owner"
"""The owner admission verified, as compact JSON ``{"orgID","userID","vouched"}``."""
LABEL_QUOTA_OWNER: Final = "llmsafespaces.dev/quota-owner"
"""Pod label: the vouched owner (org, else user) whose quota the pod uses, as a digest."""
LABEL_QUOTA_MEMBER: Final = "llmsafespaces.dev/quota-member"
"""Pod label: the vouched user whose per-member limit the pod uses, as a digest."""

ADMINS_GROUP: Final = "system:masters"
"""Cluster administrators: trusted as the chart's admission policies trust them."""
MAX_OWNER_ID: Final = 253
"""Longest userID or orgID accepted (a Kubernetes name's length): they go into annotations,
URLs and messages, so a bound keeps every copy small."""
MAX_RECORD: Final = 2 * MAX_OWNER_ID + 64
"""Longest annotation value read back; anything longer is no record."""

FLAG: Final = "--trusted-workspace-writers"
HELM_VALUE: Final = "workspaces.trustedWriters"
UPGRADE_FLAG: Final = "--owner-record-upgrade"
UPGRADE_VALUE: Final = "workspaces.ownerRecordUpgrade"

UpgradeMode = Literal["adopt", "hold"]
UPGRADE_MODES: Final = ("adopt", "hold")

_SHOWN = 64


def shown(value: str) -> str:
    """A caller's string for a message: cut to a bounded length."""
    return repr(value if len(value) <= _SHOWN else value[: _SHOWN - 1] + "…")


# -- trusted writers --------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustedWriters:
    """Usernames and groups whose ``spec.owner`` is believed; ``system:masters`` always is."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def trusts(self, user_info: Any) -> bool:
        """True when the review's ``userInfo`` is one of the trusted writers."""
        if not isinstance(user_info, Mapping):
            return False
        username = user_info.get("username")
        if isinstance(username, str) and username in self.users:
            return True
        groups = user_info.get("groups")
        if not isinstance(groups, list):
            return False
        wanted = self.groups | {ADMINS_GROUP}
        return any(isinstance(group, str) and group in wanted for group in groups)

    def describe(self) -> str:
        """The list in words, for a message that says who may write."""
        names = sorted(self.users) + [f"group:{g}" for g in sorted(self.groups | {ADMINS_GROUP})]
        return ", ".join(names)


NO_TRUSTED_WRITERS: Final = TrustedWriters()
"""Only cluster administrators."""


def trusted_writers_from(value: str | None) -> TrustedWriters:
    """``--trusted-workspace-writers`` (comma separated usernames and ``group:NAME``)."""
    users: set[str] = set()
    groups: set[str] = set()
    for item in (value or "").split(","):
        entry = item.strip()
        if not entry:
            continue
        name = entry.removeprefix("group:")
        if not name or len(name) > MAX_OWNER_ID or any(c.isspace() for c in name):
            raise ConfigError(
                f"{FLAG} entry {shown(entry)} is not a username or group:NAME",
                f"set {FLAG} / {HELM_VALUE} to usernames like "
                "'system:serviceaccount:llmsafespaces:llmsafespaces-api' or 'group:platform'",
            )
        (groups if entry.startswith("group:") else users).add(name)
    return TrustedWriters(frozenset(users), frozenset(groups))


def upgrade_mode_from(value: str | None) -> UpgradeMode:
    """``--owner-record-upgrade``: ``adopt`` or ``hold``; ConfigError naming the flag."""
    if value == "adopt":
        return "adopt"
    if value == "hold":
        return "hold"
    raise ConfigError(
        f"{UPGRADE_FLAG} must be adopt or hold (got {shown(str(value))})",
        f"set {UPGRADE_FLAG} / {UPGRADE_VALUE} to adopt or hold",
    )


# -- the record -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnerRecord:
    """The owner admission verified. ``vouched``: a trusted writer stated it (else the
    requester named themselves and their Namespace's organisation)."""

    user_id: str
    org_id: str
    vouched: bool

    def encode(self) -> str:
        return json.dumps(
            {"orgID": self.org_id, "userID": self.user_id, "vouched": self.vouched},
            separators=(",", ":"),
            sort_keys=True,
        )

    def quota_labels(self) -> dict[str, str]:
        """The pod labels the quota counts a vouched owner by (none for a tenant's own)."""
        if not self.vouched:
            return {}
        labels: dict[str, str] = {}
        if self.org_id:
            labels[LABEL_QUOTA_OWNER] = "org-" + _digest(self.org_id)
        elif self.user_id:
            labels[LABEL_QUOTA_OWNER] = "user-" + _digest(self.user_id)
        if self.user_id:
            labels[LABEL_QUOTA_MEMBER] = "user-" + _digest(self.user_id)
        return labels


def _digest(value: str) -> str:
    """A label-safe, fixed-length name for an ID of any characters."""
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def decode_record(value: Any) -> OwnerRecord | None:
    """The record an annotation value holds, or None when it holds none."""
    if not isinstance(value, str) or len(value) > MAX_RECORD:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    user, org, vouched = data.get("userID"), data.get("orgID"), data.get("vouched")
    if not isinstance(user, str) or not isinstance(org, str) or not isinstance(vouched, bool):
        return None
    return OwnerRecord(user, org, vouched)


def annotation_of(obj: Any) -> Any:
    """The raw record annotation on an object (None when absent)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations.get(ANNOTATION_VERIFIED_OWNER) if isinstance(annotations, Mapping) else None


def record_of(workspace: Any) -> OwnerRecord | None:
    """The verified owner recorded on a stored Workspace, or None (it predates the record)."""
    return decode_record(annotation_of(workspace))


# -- what admission decides -------------------------------------------------------------------


@dataclass(frozen=True)
class OwnerDecision:
    """The record the Workspace must carry after this write (None: none), or why the write is
    denied."""

    record: OwnerRecord | None = None
    problem: str | None = None


def spec_owner(obj: Any) -> tuple[str, str] | str:
    """(userID, orgID) of a Workspace's ``spec.owner`` ("" for absent), or why it is malformed."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    owner = spec.get("owner") if isinstance(spec, Mapping) else None
    if owner is None:
        return "", ""
    if not isinstance(owner, Mapping):
        return "spec.owner must be an object with userID and orgID"
    found: list[str] = []
    for field in ("userID", "orgID"):
        value = owner.get(field)
        if value is None:
            value = ""
        if not isinstance(value, str):
            return f"spec.owner.{field} must be a string"
        if len(value) > MAX_OWNER_ID:
            return f"spec.owner.{field} is {len(value)} characters; the limit is {MAX_OWNER_ID}"
        found.append(value)
    return found[0], found[1]


def decide_owner(request: Mapping[str, Any], writers: TrustedWriters) -> OwnerDecision:
    """The owner record a Workspace CREATE or UPDATE (main resource) leaves, or the denial.

    - CREATE by a trusted writer: ``spec.owner`` as written, vouched.
    - CREATE by anyone else: ``userID`` must be empty or the requester's username (the
      ``orgID`` is checked against the Namespace by the validator); recorded, not vouched.
    - UPDATE that changes ``spec.owner``: trusted writers only; recorded, vouched.
    - UPDATE that keeps it: the stored record is kept whatever the request carries. A
      Workspace that predates the record gets one only when a trusted writer asks, by setting
      the annotation (any value): the spec's owner is then vouched.
    """
    obj = request.get("object")
    owner = spec_owner(obj)
    if isinstance(owner, str):
        return OwnerDecision(problem=owner)
    user, org = owner
    user_info = request.get("userInfo")
    trusted = writers.trusts(user_info)
    if request.get("operation") == "CREATE":
        if trusted:
            return OwnerDecision(OwnerRecord(user, org, vouched=True))
        username = user_info.get("username") if isinstance(user_info, Mapping) else None
        if user and user != username:
            return OwnerDecision(
                problem=(
                    f"spec.owner.userID {shown(user)} is not you "
                    f"({shown(str(username or ''))}): only a trusted writer ({FLAG} / "
                    f"{HELM_VALUE}) may create a Workspace for someone else; leave userID "
                    "empty or set it to your own username"
                )
            )
        return OwnerDecision(OwnerRecord(user, org, vouched=False))
    old = request.get("oldObject")
    before = spec_owner(old) if isinstance(old, Mapping) else ("", "")
    if before != owner:
        if not trusted:
            return OwnerDecision(
                problem=(
                    "spec.owner cannot change after the Workspace is created: only a trusted "
                    f"writer ({FLAG} / {HELM_VALUE}) may give it another owner; keep "
                    "spec.owner as it was"
                )
            )
        return OwnerDecision(OwnerRecord(user, org, vouched=True))
    kept = record_of(old)
    if kept is not None:
        return OwnerDecision(kept)
    if trusted and annotation_of(obj) is not None:
        return OwnerDecision(OwnerRecord(user, org, vouched=True))
    return OwnerDecision(None)


def record_problem(request: Mapping[str, Any], decision: OwnerDecision) -> str | None:
    """Why the Workspace about to be stored carries another record than ``decision``'s (the
    mutating step writes it, so this only trips when something after it changed the record).

    No record at all passes: it claims nothing, and everything that reads the record treats a
    Workspace without one as unverified (``--owner-record-upgrade``)."""
    expected = decision.record.encode() if decision.record is not None else None
    found = annotation_of(request.get("object"))
    if found is None or found == expected:
        return None
    return (
        f"metadata.annotations[{ANNOTATION_VERIFIED_OWNER}] is written by the wspin webhook "
        "from who created the Workspace; it cannot be set or changed by hand (a trusted writer "
        "confirms a Workspace that has none by setting it to any value)"
    )
