"""The writes a pass decided on (``Plan.writes``), made in one place, in order, before the
status write.

A pod deleted with the termination grace, the credentials Secret written again, a Workspace's
own claims deleted past its TTL, the Workspace itself deleted. Answers are the reconciler's
to interpret (a Workspace or namespace gone ends the pass quietly); a claim already gone is
what was asked for.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence

from controller.types import Obj, ObjectKey
from controller.workspace.pod.names import names
from controller.workspace.reconcile.deps import ReconcileDeps
from controller.workspace.reconcile.plan import (
    DeleteClaims,
    DeletePod,
    DeleteWorkspace,
    RestoreSecret,
    Write,
)
from wspin.core.errors import NotFound
from wspin.core.kinds import PVCS, WORKSPACES
from wspin.core.logs import fields

log = logging.getLogger("controller.workspace")


async def act(deps: ReconcileDeps, ws: Obj, writes: Sequence[Write]) -> None:
    """Make ``writes`` for ``ws``, one after another."""
    meta = ws["metadata"]
    for write in writes:
        if isinstance(write, DeletePod):
            await deps.writes.delete_pod(write.pod)
        elif isinstance(write, RestoreSecret):
            log.info(
                "restoring the workspace credentials secret the kubelet reports missing",
                extra=fields(workspace=str(ObjectKey.of(ws)), secret=names(ws).secret),
            )
            await deps.writes.write_secret(ws, write.credentials)
        elif isinstance(write, DeleteClaims):
            for pvc in write.claims:
                claim = pvc["metadata"]
                with contextlib.suppress(NotFound):
                    await deps.kube.delete(
                        PVCS, claim["name"], claim.get("namespace"), uid=str(claim.get("uid") or "")
                    )
        elif isinstance(write, DeleteWorkspace):
            await deps.kube.delete(
                WORKSPACES, meta["name"], meta.get("namespace"), uid=str(meta.get("uid") or "")
            )
