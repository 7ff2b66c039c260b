"""What the Workspace CRD's structural schema fills into a spec that names none of these
fields, as a real API server does: ``architecture``, ``maxActiveSessions``, and the nested
defaults inside the ``autoSuspend`` object it defaults to ``{}``."""

from __future__ import annotations

from typing import Any, Final

SPEC_DEFAULTS: Final[dict[str, Any]] = {
    "architecture": "amd64",
    "maxActiveSessions": 5,
    "autoSuspend": {"enabled": True, "idleTimeoutSeconds": 86400},
    "timeout": 0,
    "ttlSecondsAfterSuspended": 0,
}
