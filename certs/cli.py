"""``wspin certs``: make certificates for file mode, and publish a CA into the webhooks.

- ``generate`` writes a fresh CA and serving certificate for a Service (``ca.crt``,
  ``tls.crt``, ``tls.key``), for users who supply their own files;
- ``patch-ca-bundle`` sets a CA bundle on every entry of the webhook configurations, the
  same idempotent patch the self-managed mode runs.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

from wspin.core.errors import ConfigError, WspinError
from wspin.core.flags import add_flag, add_kubeconfig_flag

# cryptography and the Kubernetes client are imported by the handlers that use them, so
# `wspin certs --help` answers at once.

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def register(subparsers: Any) -> None:
    certs = subparsers.add_parser(
        "certs",
        help="generate webhook certificates or patch a CA bundle into the webhooks",
        description="Certificates for the admission webhook's TLS.",
    )
    actions = certs.add_subparsers(dest="certs_action", required=True, metavar="ACTION")

    generate = actions.add_parser(
        "generate",
        help="write a new CA and serving certificate for a Service",
        description="Write ca.crt, tls.crt and tls.key (mode 0600): an ECDSA P-256 CA valid "
        "10 years and a serving certificate valid 1 year for NAME, NAME.NS, NAME.NS.svc and "
        "NAME.NS.svc.cluster.local.",
    )
    add_flag(generate, "--service", env="WSPIN_SERVICE_NAME", help="the webhook's Service name")
    add_flag(generate, "--namespace", env="POD_NAMESPACE", help="the Service's namespace")
    add_flag(generate, "--out", env="WSPIN_CERTS_OUT", help="directory to write the files to")
    generate.set_defaults(handler=run_generate)

    patch = actions.add_parser(
        "patch-ca-bundle",
        help="set the caBundle of every webhook in the named configurations",
        description="Set the CA bundle of every webhook entry of a Mutating and/or "
        "ValidatingWebhookConfiguration; configurations already carrying it are not written.",
    )
    add_flag(
        patch, "--mutating", env="WSPIN_MUTATING_WEBHOOK_NAME", help="MutatingWebhookConfiguration"
    )
    add_flag(
        patch,
        "--validating",
        env="WSPIN_VALIDATING_WEBHOOK_NAME",
        help="ValidatingWebhookConfiguration",
    )
    add_flag(patch, "--ca-file", env="WSPIN_CA_FILE", help="PEM file with the CA certificate(s)")
    add_kubeconfig_flag(patch)
    patch.set_defaults(handler=run_patch_ca_bundle)


def run_generate(args: argparse.Namespace) -> int:
    from certs.build import fingerprint, issue_serving, new_ca, service_dns_names
    from certs.files import write_certificates
    from wspin.core.clock import utc_now

    try:
        service = _name(args.service, "--service", "a Service name")
        namespace = _name(args.namespace, "--namespace", "a namespace")
        if not args.out:
            raise ConfigError("--out is required", "pass --out DIR (created if missing)")
        now = utc_now()
        ca = new_ca(now)
        serving = issue_serving(ca, service_dns_names(service, namespace), now)
        try:
            written = write_certificates(Path(args.out), ca, serving)
        except OSError as err:
            raise ConfigError(
                f"cannot write certificates to {args.out}: {err}",
                "pass --out naming a writable directory",
            ) from err
    except WspinError as err:
        return _fail(err)
    for path in written:
        print(path)
    print(
        f"serving certificate {fingerprint(serving.cert)} for {service}.{namespace}.svc, "
        f"valid until {serving.not_after:%Y-%m-%d}; CA {fingerprint(ca.cert)} valid until "
        f"{ca.not_after:%Y-%m-%d}",
        file=sys.stderr,
    )
    return 0


def run_patch_ca_bundle(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_patch(args))
    except WspinError as err:
        return _fail(err)


async def _patch(args: argparse.Namespace) -> int:
    from certs.cabundle import patch_ca_bundle, targets
    from wspin.core.errors import KubeAPIError, NotFound
    from wspin.kube.client import Kube
    from wspin.kube.config import api_client

    configs = targets(args.mutating, args.validating)
    if not configs:
        raise ConfigError(
            "no webhook configuration named", "pass --mutating NAME and/or --validating NAME"
        )
    bundle = _read_bundle(args.ca_file)
    api = await api_client(args.kubeconfig)
    try:
        written = await patch_ca_bundle(Kube(api), bundle, configs)
    except NotFound as err:
        raise ConfigError(
            f"webhook configuration not found: {err}", "check --mutating and --validating"
        ) from err
    except KubeAPIError as err:
        raise WspinError(
            f"patching the caBundle failed: {err}",
            "check --kubeconfig and that it may get and update webhook configurations",
        ) from err
    finally:
        await api.close()
    for target in configs:
        state = "patched" if target.name in written else "already current"
        print(f"{target.resource.kind} {target.name}: {state}")
    return 0


def _read_bundle(path: str | None) -> bytes:
    from certs.build import CertificateError, is_ca, load_certificates, pem_bundle

    if not path:
        raise ConfigError("--ca-file is required", "pass --ca-file naming a PEM CA certificate")
    try:
        pem = Path(path).read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read --ca-file {path}: {err}", "pass a readable file") from err
    try:
        certs = load_certificates(pem, f"--ca-file {path}")
    except CertificateError as err:
        raise ConfigError(str(err), "pass the PEM CA certificate (ca.crt)") from err
    if not all(is_ca(cert) for cert in certs):
        raise ConfigError(
            f"--ca-file {path} holds a certificate that is not a CA",
            "pass the issuing CA (ca.crt), not the serving certificate (tls.crt)",
        )
    return pem_bundle(certs)  # the same bytes self-managed mode would publish


def _name(value: str | None, flag: str, what: str) -> str:
    if not value:
        raise ConfigError(f"{flag} is required", f"pass {flag} with {what}")
    if not _DNS_LABEL.match(value):
        raise ConfigError(
            f"{flag} {value!r} is not {what}",
            "use at most 63 lowercase letters, digits and '-'",
        )
    return value


def _fail(err: WspinError) -> int:
    print(f"error: {err}", file=sys.stderr)
    return 1
