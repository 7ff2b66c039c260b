"""Withdrawing what a Workspace staged: when it is deleted, and when its name belongs to
another Workspace.

- ``clean_up`` (deletion): every envelope labelled with the Workspace's uid is deleted (one
  label-selected delete, whatever any record says) and its keys leave the redactor. A failed
  delete is reported as orphaned (a Warning Event and an error line naming the selector), never
  raised: nothing
  garbage-collects across namespaces, and termination must not hang on the relay. Only the
  identity's owner deletes anything: the envelopes behind a name in conflict are another
  Workspace's, whatever the annotations of this one claim.
- ``stand_down`` (``NameConflict``): nothing in the relay namespace is touched, so the owner's
  envelopes stay exactly as they are; what this Workspace holds itself goes: its handoff
  entries (their tokens name an identity it does not own) and its bookkeeping (it would
  describe the owner's envelopes). One Warning Event per episode.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller.staging import conditions as cond
from controller.staging.desired import (
    STAGED_PROVIDERS,
    has_legacy_annotations,
    parse_providers,
    recorded,
    write_bookkeeping,
)
from controller.staging.envelopes import legacy_selector, owned_selector
from controller.staging.handoff import revision
from controller.staging.ownership import Claimant
from controller.toolkit.conditions import find_condition
from controller.types import Obj
from wspin.core.errors import KubeAPIError
from wspin.core.kinds import WORKSPACES
from wspin.core.logs import fields
from wspin.core.owners import record_of
from wspin.core.workspace import WorkspaceStatus

if TYPE_CHECKING:
    from controller.staging.staging_pass import RelayStagingPass

log = logging.getLogger("controller.staging")


async def clean_up(self: RelayStagingPass, ws: Obj) -> None:
    """Delete every envelope labelled with this Workspace's uid (and, after an upgrade, its
    identity's envelopes an earlier release wrote without one); a failed delete is reported as
    orphaned, never raised: termination goes on.

    Only the identity's owner deletes anything: the envelopes of a Workspace in conflict
    are another Workspace's, whatever its own annotations claim."""
    name = ws["metadata"]["name"]
    where = f"{ws['metadata'].get('namespace', '')}/{name}"
    holder = self.names.conflict(ws)
    if holder is not None:
        log.info(
            "relay cleanup skipped: the identity belongs to another Workspace",
            extra=fields(workspace=where, owner_namespace=holder.namespace),
        )
        return
    bookkeeping = parse_providers(recorded(ws).get(STAGED_PROVIDERS))
    uid = str(ws["metadata"].get("uid") or "")
    selectors = [owned_selector(uid)]
    if has_legacy_annotations(ws):
        selectors.append(legacy_selector(name))
    for selector in selectors:
        try:
            await self.relay.delete_selected(selector)
        except KubeAPIError as err:
            log.error(
                "envelopes ORPHANED",
                extra=fields(workspace=where, selector=selector, error=str(err)),
            )
            await self.events.emit(
                ws,
                WORKSPACES,
                "Warning",
                cond.EVENT_ENVELOPE_ORPHANED,
                f"could not delete the envelopes in {self.config.namespace} labelled "
                f"{selector} ({err}); delete them by hand",
            )
    for staged in bookkeeping.values():
        self.redactor.unregister(staged.redaction_id)
    record = record_of(ws)
    if record is not None:
        meta = ws.get("metadata") or {}
        self.source.forget(
            name,
            record.user_id,
            uid=str(meta.get("uid") or ""),
            namespace=str(meta.get("namespace") or ""),
        )


async def stand_down(self: RelayStagingPass, ws: Obj, holder: Claimant) -> list[Obj]:
    """Stage nothing for a Workspace whose identity another Workspace owns.

    Nothing in the relay namespace is touched (the owner's envelopes stay as they are);
    what this Workspace holds itself goes: handoff entries (their tokens name an identity
    it does not own) and bookkeeping (it would describe the owner's envelopes)."""
    meta = ws["metadata"]
    name, generation = meta["name"], int(meta.get("generation") or 0)
    condition = cond.name_conflict(name, holder.namespace, generation)
    current = find_condition(WorkspaceStatus.of(ws.get("status")).conditions, cond.STAGED)
    if current is None or (current.get("reason"), current.get("message")) != (
        condition["reason"],
        condition["message"],
    ):
        log.warning(
            "relay identity held by another Workspace",
            extra=fields(
                workspace=f"{meta.get('namespace', '')}/{name}",
                owner_namespace=holder.namespace,
            ),
        )
        await self.events.emit(
            ws,
            WORKSPACES,
            "Warning",
            cond.EVENT_NAME_CONFLICT,
            condition["message"],
            episode=holder.uid,
        )
    existing = await self.handoffs.read(ws)
    if existing.entries:
        rev = revision(self.config.router_url, [], {})
        await self.handoffs.write(ws, existing, rev, self.config.router_url, [])
    await write_bookkeeping(self.kube, ws, {})
    return [condition]
