"""Checks on ``RelayTokenStoreSettings``: where the real drivers store relay VM tokens.

Pure: no I/O. The settings live with the others (``controller.settings``). Checked once at
start when the real drivers run, so a missing vault or instance profile stops the process
with the flag to fix, instead of surfacing as VMs that boot without a token.
"""

from __future__ import annotations

import re
from typing import Final

from controller.settings import RelayTokenStoreSettings
from wspin.core.errors import ConfigError

_HELM: Final = "controller.inferenceRelay.tokenStore"
_PROFILE = re.compile(r"^(arn:aws[a-z-]*:iam::\d{12}:instance-profile/)?[\w+=,.@/-]{1,128}$")
_PREFIX = re.compile(r"^(/[A-Za-z0-9_.-]+){1,10}$")
_OCID_BODY = r"\.[a-z0-9._-]+$"


def validate_token_store(config: RelayTokenStoreSettings, cloud: str) -> None:
    """Raise ``ConfigError`` naming the flag and Helm value of the first malformed setting, or
    when no cloud can store a token at all. A provider left unset is not an error here: an
    install that runs relays on one cloud names only that cloud's store, and a launch on the
    other is refused by its driver with the flags to set. The fake cloud needs none."""
    if cloud == "fake":
        return
    aws = bool(config.aws_instance_profile)
    oci = bool(config.oci_vault or config.oci_key)
    if not (aws or oci):
        raise ConfigError(
            "no relay VM token store: relay VMs could not read their token",
            f"set --relay-aws-instance-profile / {_HELM}.aws.instanceProfile (AWS), or "
            f"--relay-oci-vault and --relay-oci-key / {_HELM}.oci.vaultOCID and .keyOCID (OCI)",
        )
    if aws and not _PROFILE.match(config.aws_instance_profile):
        raise ConfigError(
            f"--relay-aws-instance-profile {config.aws_instance_profile!r} is not an instance "
            "profile name or ARN",
            f"set {_HELM}.aws.instanceProfile to e.g. relay-vm or "
            "arn:aws:iam::123456789012:instance-profile/relay-vm",
        )
    if not _PREFIX.match(config.aws_parameter_prefix) or ".." in config.aws_parameter_prefix:
        raise ConfigError(
            f"--relay-aws-token-prefix {config.aws_parameter_prefix!r} is not an SSM path",
            f"set --relay-aws-token-prefix / {_HELM}.aws.parameterPrefix to e.g. "
            "/llmsafespaces/relay-token",
        )
    if not oci:
        return
    for flag, value, kind, helm in (
        ("--relay-oci-vault", config.oci_vault, "vault", "vaultOCID"),
        ("--relay-oci-key", config.oci_key, "key", "keyOCID"),
    ):
        if not re.match(rf"^ocid1\.{kind}{_OCID_BODY}", value):
            shown = repr(value) if value else "empty"
            raise ConfigError(
                f"{flag} is {shown}: relay VM tokens on OCI need a vault {kind} OCID",
                f"set {flag} / {_HELM}.oci.{helm} to an ocid1.{kind}.… OCID",
            )
