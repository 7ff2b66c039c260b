"""``wspin controller``: the controller process.

Reads like the sentence it is: parse settings (bad → exit 1), connect to the API, arm relay
staging (enabled but not armed → exit 85), register the controllers, run the manager until
SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from controller.settings import LOG_LEVELS, ControllerSettings, add_controller_flags
from controller.settings import settings_from_args as build_settings
from wspin.core.errors import ConfigError, KubeAPIError
from wspin.core.logs import add_scrubber, fields, remove_scrubber, setup_logging
from wspin.core.redact import Redactor

log = logging.getLogger("controller")

INTERNAL_TOKEN_GROUP = "internal-token"  # noqa: S105 - a group name, not a secret
CANNOT_START = "cannot start"
"""The one line a start that the API server cannot serve ends with (``error``, ``fix``)."""
RETRY_FIX = "check the API server and the controller's RBAC, then restart the controller"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "controller",
        help="run the Workspace and InferenceRelay controllers",
        description="Reconcile Workspaces and InferenceRelays, arm relay-only key delivery, "
        "and sweep orphaned relay VMs; one active replica via a Lease.",
    )
    add_controller_flags(parser)
    parser.set_defaults(handler=run_controller)


def run_controller(args: argparse.Namespace) -> int:
    level = str(args.log_level).strip().lower()
    setup_logging(level if level in LOG_LEVELS else "info")
    try:
        settings = build_settings(args)
        # Imported here so `wspin webhook` and `wspin inject` never load the controller.
        from controller.setup import check_settings

        check_settings(settings)  # every flag judged before the first API call
    except ConfigError as err:
        log.error("invalid configuration", extra=fields(error=str(err)))
        print(f"error: {err}", file=sys.stderr)
        return 1
    # The process's one redactor: the internal token now, staged keys as they are sealed.
    # Messages quote text other systems chose (a redirect target, an error body), so "we
    # never log the token" needs this backstop on every line, not just care at call sites.
    redactor = Redactor()
    redactor.register(INTERNAL_TOKEN_GROUP, settings.api_internal_token)
    add_scrubber(redactor.redact)
    try:
        return asyncio.run(serve(settings, redactor))
    finally:
        remove_scrubber(redactor.redact)


async def serve(settings: ControllerSettings, redactor: Redactor | None = None) -> int:
    """Run the controller process with ``settings``; returns the exit status. ``redactor``
    is the process's, already on the log path (None: a private one)."""
    # Imported here so `wspin webhook` and `wspin inject` never load the controller runtime.
    from controller.setup import (
        load_credential_keys,
        new_manager,
        relay_staging_exit_code_for,
        setup_controllers,
        setup_relay_controller,
        setup_relay_staging,
        start_needs,
    )
    from controller.staging.arming import REFUSED_MESSAGE, validate_flags
    from wspin.kube.client import Kube
    from wspin.kube.config import api_client
    from wspin.kube.preflight import check_api_server

    staging = settings.relay_staging
    if staging.enabled:
        try:  # the staging flags, judged before any I/O too (their refusal exits 85)
            validate_flags(
                router_url=staging.router_url,
                namespace=staging.namespace,
                token_ttl=staging.token_ttl,
                api_service_url=settings.workspace.api_service_url,
            )
        except Exception as err:
            log.error(REFUSED_MESSAGE, extra=fields(reason=str(err)))
            return relay_staging_exit_code_for(err)
    try:
        api = await api_client(settings.kubeconfig)
    except ConfigError as err:
        log.error("cannot reach the Kubernetes API", extra=fields(error=str(err)))
        return 1
    try:
        try:
            await check_api_server(Kube(api), start_needs(settings))
        except ConfigError as err:
            log.error(CANNOT_START, extra=fields(error=err.message, fix=err.fix))
            return 1
        manager = new_manager(Kube(api), settings)
        try:
            relay_staging = await setup_relay_staging(
                manager,
                enabled=staging.enabled,
                router_url=staging.router_url,
                namespace=staging.namespace,
                token_ttl=staging.token_ttl,
                api_service_url=settings.workspace.api_service_url,
                api_internal_token=settings.api_internal_token,
            )
        except Exception as err:
            log.error(REFUSED_MESSAGE, extra=fields(reason=str(err)))
            return relay_staging_exit_code_for(err)
        try:
            keys = await load_credential_keys(manager.kube, settings.namespace)
            setup_controllers(
                manager,
                settings,
                credential_keys=keys,
                relay_staging=relay_staging,
                redactor=redactor,
            )
            setup_relay_controller(manager, settings)
        except ConfigError as err:
            log.error("invalid configuration", extra=fields(error=str(err)))
            return 1
        except KubeAPIError as err:  # the API server changed its answer since the check
            log.error(CANNOT_START, extra=fields(error=err.message, fix=RETRY_FIX))
            return 1
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, manager.stop)
        await manager.run()
        log.info("controller stopped")
        return 0
    finally:
        await api.close()
