"""Relay-only key delivery ("relay staging"), controller side.

``arming`` decides at start whether staging may run at all (flags, config, the startup guard
within ``ARMING_STARTUP_GUARD_WINDOW``; exit 85 when not armed) and yields the
``RelayStagingConfig`` the per-workspace staging pass consumes. ``secrets`` is the direct,
uncached client for the relay namespace: it reads by name and never lists or watches, which
is all the RBAC there allows.

The per-workspace pass (``staging_pass.RelayStagingPass``, run by the Workspace reconciler)
is built from one module per concept: ``clients`` (the credential source and the router's
internal API, the two HTTP services it calls); ``desired`` (which providers are staged and
what the Workspace's bookkeeping says was staged before); ``envelopes`` (HPKE sealing, the
envelope Secrets and their revocation); ``handoff`` (scoped tokens, the revision, the handoff
Secret); ``ownership`` (one Workspace per relay identity: a same-named Workspace in another
namespace gets ``NameConflict``, never another tenant's key); ``withdrawal`` (what a deleted
Workspace, or one whose name another owns, staged goes); ``schedule`` (when the next pass is
due); ``conditions`` (the conditions and Events the pass reports); ``escalation`` (the rotate
recovery). Every staged key is
registered with the process's ``wspin.core.redact.Redactor``, which keeps it out of log lines,
Events and condition messages. What the running pod applied (``status.secretsDelivery``:
agentd's health report) reaches the pass inside the Workspace it is given, fresh from the
Workspace controller's agent scheduler, the one reader of agentd. Not exported here: the
process imports the pass only when staging is armed.
"""

from controller.staging.arming import (
    ARMING_STARTUP_GUARD_WINDOW,
    RELAY_STAGING_NOT_ARMED_EXIT_CODE,
    RelayStagingConfig,
    RelayStagingError,
    relay_staging_exit_code_for,
    setup_relay_staging,
)

__all__ = [
    "ARMING_STARTUP_GUARD_WINDOW",
    "RELAY_STAGING_NOT_ARMED_EXIT_CODE",
    "RelayStagingConfig",
    "RelayStagingError",
    "relay_staging_exit_code_for",
    "setup_relay_staging",
]
