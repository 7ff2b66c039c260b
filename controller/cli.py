"""``wspin controller``: the controller process.

Reads like the sentence it is: parse settings (bad → exit 1), connect to the API, arm relay
staging (enabled but not armed → exit 85), register the controllers, run the manager until
SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

from controller.settings import LOG_LEVELS, ControllerSettings, add_controller_flags
from controller.settings import settings_from_args as build_settings
from wspin.core.errors import ConfigError
from wspin.core.logs import add_scrubber, fields, remove_scrubber, setup_logging

log = logging.getLogger("controller")


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
    except ConfigError as err:
        log.error("invalid configuration", extra=fields(error=str(err)))
        print(f"error: {err}", file=sys.stderr)
        return 1
    scrub = secret_scrubber(settings.api_internal_token)
    add_scrubber(scrub)
    try:
        return asyncio.run(serve(settings))
    finally:
        remove_scrubber(scrub)


def secret_scrubber(secret: str) -> Callable[[str], str]:
    """A log-line filter that blanks ``secret`` as written, JSON-escaped and URL-encoded.

    Messages quote text other systems chose (a redirect target, an error string, a request
    URL), so "we never log the internal token" needs this backstop, not just care at each
    call site. Each character may appear raw, JSON-escaped (the line is JSON), or
    percent-encoded in either hex case (``+`` for a space, ``%25XX`` when encoded twice), in
    any mix, so a token in a query string or a form body is caught as well. The pattern has
    one alternation per character and no nested repetition: matching stays linear."""
    if not secret:
        return lambda line: line
    pattern = re.compile("".join(_char_forms(char) for char in secret))

    def scrub(line: str) -> str:
        return pattern.sub("[redacted]", line)

    return scrub


def _char_forms(char: str) -> str:
    """A regex for one character of a secret in every form a log line can carry it."""
    escaped = json.dumps(char)[1:-1]
    encoded = "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))
    forms = {re.escape(char), re.escape(escaped)}
    for form in (encoded, encoded.replace("%", "%25")):
        forms.add("".join(f"[{c}{c.lower()}]" if c.isalpha() else re.escape(c) for c in form))
    if char == " ":
        forms.add(r"\+")
    return "(?:" + "|".join(sorted(forms, key=len, reverse=True)) + ")"


async def serve(settings: ControllerSettings) -> int:
    """Run the controller process with ``settings``; returns the exit status."""
    # Imported here so `wspin webhook` and `wspin inject` never load the controller runtime.
    from controller.setup import (
        load_credential_keys,
        new_manager,
        relay_staging_exit_code_for,
        setup_controllers,
        setup_relay_controller,
        setup_relay_staging,
    )
    from controller.staging.arming import REFUSED_MESSAGE
    from wspin.kube.client import Kube
    from wspin.kube.config import api_client

    try:
        api = await api_client(settings.kubeconfig)
    except ConfigError as err:
        log.error("cannot reach the Kubernetes API", extra=fields(error=str(err)))
        return 1
    try:
        manager = new_manager(Kube(api), settings)
        staging = settings.relay_staging
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
            setup_controllers(manager, settings, credential_keys=keys, relay_staging=relay_staging)
            setup_relay_controller(manager, settings)
        except ConfigError as err:
            log.error("invalid configuration", extra=fields(error=str(err)))
            return 1
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, manager.stop)
        await manager.run()
        log.info("controller stopped")
        return 0
    finally:
        await api.close()
