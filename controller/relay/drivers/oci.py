"""The OCI driver: Oracle Cloud compute through the ``oci`` SDK, calls in a worker thread.

The SDK signs requests (OCI signature version 1) and parses the API key. Credentials come
from the ``oci-credentials`` Secret (``tenancy``, ``user``, ``fingerprint``, ``key`` as PEM,
optional ``region``, ``compartment``, ``subnet`` and ``image``); a missing key or one the SDK
cannot parse is a configuration error. The image is the newest Canonical Ubuntu 22.04 build
OCI lists as compatible with the shape, so the CPU architecture always matches a shape of
either kind. A launch is idempotent twice over: an instance the launch tag already names is
returned without a second launch, and the call carries the client token as
``opc-retry-token``.

The VM token is a secret in the operator's vault (``--relay-oci-vault``), encrypted with
``--relay-oci-key``, named after the InferenceRelay's uid and the launch and tagged like the
VM; the VM reads it at boot with the oci CLI as an instance principal (the image must have
the CLI; a dynamic group holding the relay VMs needs ``read secret-bundles`` in the
compartment). ``destroy`` schedules the deletion of the secret the VM's tag names, and only
of a secret in that vault carrying the relay tags: a tag anyone with instance rights edits
cannot point it at another secret.

Errors are classed by OCI's status and error code, once, here (``classify_status``).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import functools
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

import oci

from controller.relay.drivers.base import (
    MANAGED_BY_VALUE,
    TAG_LAUNCH,
    TAG_MANAGED_BY,
    TAG_TOKEN_REF,
    CloudInstance,
    ConfigurationError,
    DriverError,
    InstanceNotFound,
    LaunchRequest,
    QuotaExceeded,
    Throttled,
    TokenRef,
    TokenSlot,
    TransientCloudError,
    VMState,
    matches,
    truncate,
)
from wspin.core.clock import Clock, utc_now
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

REQUIRED_KEYS: Final = ("tenancy", "user", "fingerprint", "key")

_STATES: Final[dict[str, VMState]] = {
    "provisioning": "pending",
    "starting": "pending",
    "running": "running",
    "stopping": "stopping",
    "stopped": "stopped",
    "terminating": "terminated",
    "terminated": "terminated",
}

_SECRET_DELETION_DELAY: Final = timedelta(days=1, hours=1)
"""OCI deletes a secret no sooner than a day after it is scheduled; until then nobody reads
it (a secret pending deletion serves no bundle)."""
_LIVE_SECRET_STATES: Final = frozenset({"CREATING", "ACTIVE", "UPDATING"})

T = TypeVar("T")


def map_state(lifecycle: str) -> VMState:
    return _STATES.get(lifecycle.lower(), "pending")


_QUOTA_CODES: Final = frozenset({"LimitExceeded", "QuotaExceeded", "OutOfCapacity"})


def classify_status(
    status: int, code: str, text: str, *, instance_call: bool = False
) -> DriverError:
    """Map an OCI API error to the driver error classes by its status and error code.

    ``instance_call``: the call names one instance, so a 404 means the instance is gone
    (elsewhere a 404 is a compartment, subnet or image the credentials cannot see)."""
    message = truncate(f"OCI: {status} {code}: {text}")
    if status == 404 and instance_call:
        return InstanceNotFound(message)
    if code in _QUOTA_CODES or (status == 500 and "capacity" in text.lower()):
        return QuotaExceeded(message)
    if status == 429:
        return Throttled(message)
    if status in (400, 401, 403, 404, 409, 412, 422):
        return ConfigurationError(message)
    return TransientCloudError(message)


def oci_config(
    data: dict[str, str], region: str, *, secret_name: str, default_region: str
) -> dict[str, Any]:
    """The SDK config from the decoded data of Secret ``secret_name``; raises
    ``ConfigurationError``."""
    missing = [key for key in REQUIRED_KEYS if not data.get(key)]
    if missing:
        raise ConfigurationError(
            f"Secret {secret_name} lacks {', '.join(missing)}",
            f"add {', '.join(missing)} to Secret {secret_name}",
        )
    config = {
        "tenancy": data["tenancy"],
        "user": data["user"],
        "fingerprint": data["fingerprint"],
        "key_content": data["key"],
        "region": region or data.get("region") or default_region,
    }
    try:
        oci.config.validate_config(config)
        oci.signer.Signer(
            config["tenancy"], config["user"], config["fingerprint"], None,
            private_key_content=config["key_content"],
        )  # fmt: skip
    except (oci.exceptions.InvalidConfig, oci.exceptions.InvalidPrivateKey, ValueError) as err:
        raise ConfigurationError(
            f"Secret {secret_name}: unusable OCI API key or config: {truncate(str(err))}",
            f"put the PEM API signing key in Secret {secret_name} key 'key'",
        ) from err
    return config


class OciDriver:
    """``Driver`` for OCI compute."""

    def __init__(
        self,
        kube: Kube | None,
        namespace: str,
        *,
        secret_name: str,
        default_region: str,
        endpoint: str | None = None,
        vault: str = "",
        key: str = "",
        clock: Clock = utc_now,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret_name = secret_name
        """The credentials Secret (its ``providers`` entry names it)."""
        self.default_region = default_region
        self.endpoint = endpoint
        """Override of every service endpoint (tests point it at a loopback server)."""
        self.vault = vault
        """``--relay-oci-vault``: the vault OCID the VM tokens are stored in."""
        self.key = key
        """``--relay-oci-key``: the master encryption key OCID (in that vault)."""
        self.clock = clock

    async def store_token(self, slot: TokenSlot, token: str) -> TokenRef:
        if not (self.vault and self.key):
            raise ConfigurationError(
                "no OCI vault to store the relay VM token in",
                "set --relay-oci-vault and --relay-oci-key",
            )
        data = await self._secret()
        config = await self._config(data, slot.region)
        compartment = data.get("compartment") or config["tenancy"]
        vaults = await self._client(oci.vault.VaultsClient, config)
        name = f"relay-token-{slot.owner_uid}-{slot.launch[:32]}"
        content = oci.vault.models.Base64SecretContentDetails(
            content_type="BASE64", content=base64.b64encode(token.encode()).decode()
        )
        listed = await self._call(vaults.list_secrets, compartment, name=name, vault_id=self.vault)
        live = [s for s in listed.data if str(s.lifecycle_state) in _LIVE_SECRET_STATES]
        if live:
            # The same launch again (a retry): a new version of the same secret.
            secret_id = str(live[0].id)
            await self._call(
                vaults.update_secret,
                secret_id,
                oci.vault.models.UpdateSecretDetails(secret_content=content),
            )
        else:
            created = await self._call(
                vaults.create_secret,
                oci.vault.models.CreateSecretDetails(
                    compartment_id=compartment,
                    secret_name=name,
                    vault_id=self.vault,
                    key_id=self.key,
                    secret_content=content,
                    freeform_tags=dict(slot.tags),
                ),
            )
            secret_id = str(created.data.id)
        fetch = (
            "oci secrets secret-bundle get --auth instance_principal "
            f"--region {shlex.quote(config['region'])} --secret-id {shlex.quote(secret_id)} "
            "--query 'data.\"secret-bundle-content\".content' --raw-output | base64 -d"
        )
        return TokenRef(reference=secret_id, fetch=fetch)

    async def launch(self, request: LaunchRequest) -> str:
        data = await self._secret()
        config = await self._config(data, request.region)
        compartment = data.get("compartment") or config["tenancy"]
        subnet = data.get("subnet", "")
        if not subnet:
            raise ConfigurationError(
                f"Secret {self.secret_name} lacks 'subnet' (the OCID relay VMs attach to)",
                f"add key subnet to Secret {self.secret_name}",
            )
        compute = await self._client(oci.core.ComputeClient, config)
        if request.client_token:
            for instance in await self._instances(compute, compartment):
                if dict(instance.freeform_tags or {}).get(TAG_LAUNCH) == request.client_token:
                    return str(instance.id)
        if not request.shape:
            raise ConfigurationError("launch request without a shape")
        shape = request.shape
        identity = await self._client(oci.identity.IdentityClient, config)
        domains = await self._call(
            identity.list_availability_domains, compartment_id=config["tenancy"]
        )
        if not domains.data:
            raise ConfigurationError(f"OCI: no availability domain in {config['region']}")
        image_id = data.get("image") or await self._image(compute, compartment, shape)
        details = oci.core.models.LaunchInstanceDetails(
            availability_domain=domains.data[0].name,
            compartment_id=compartment,
            display_name=request.name,
            shape=shape,
            source_details=oci.core.models.InstanceSourceViaImageDetails(
                image_id=image_id, boot_volume_size_in_gbs=50
            ),
            create_vnic_details=oci.core.models.CreateVnicDetails(
                assign_public_ip=True, subnet_id=subnet
            ),
            metadata={"user_data": request.cloud_init},
            # The metadata service hands out the instance principal's credentials, which
            # read the token: only its v2 endpoints, which want a header a forwarded plain
            # GET does not carry.
            instance_options=oci.core.models.InstanceOptions(
                are_legacy_imds_endpoints_disabled=True
            ),
            freeform_tags=dict(request.tags),
        )
        launched = await self._call(
            compute.launch_instance, details, opc_retry_token=request.client_token or None
        )
        return str(launched.data.id)

    async def describe(self, instance_id: str, region: str) -> CloudInstance:
        data = await self._secret()
        config = await self._config(data, region)
        compartment = data.get("compartment") or config["tenancy"]
        compute = await self._client(oci.core.ComputeClient, config)
        reply = await self._call(compute.get_instance, instance_id, instance_call=True)
        return await self._report(config, compartment, reply.data, region)

    async def destroy(self, instance_id: str, region: str) -> None:
        config = await self._config(await self._secret(), region)
        compute = await self._client(oci.core.ComputeClient, config)
        try:
            instance = await self._call(compute.get_instance, instance_id, instance_call=True)
        except InstanceNotFound:
            return  # already gone (and its token with it): destroy is idempotent
        with contextlib.suppress(InstanceNotFound):  # gone meanwhile
            await self._call(compute.terminate_instance, instance_id, instance_call=True)
        tags = dict(instance.data.freeform_tags or {})
        await self._delete_token(config, tags.get(TAG_TOKEN_REF, ""))

    async def list(
        self, tags: Mapping[str, str], regions: Sequence[str]
    ) -> builtins.list[CloudInstance]:
        data = await self._secret()
        found: builtins.list[CloudInstance] = []
        for region in regions:
            config = await self._config(data, region)
            compartment = data.get("compartment") or config["tenancy"]
            compute = await self._client(oci.core.ComputeClient, config)
            for instance in await self._instances(compute, compartment):
                instance_tags = dict(instance.freeform_tags or {})
                if TAG_MANAGED_BY not in instance_tags or not matches(instance_tags, tags):
                    continue
                found.append(await self._report(config, compartment, instance, region))
        return found

    # -- internals ----------------------------------------------------------------------------

    async def _delete_token(self, config: dict[str, Any], secret_id: str) -> None:
        """Schedule the deletion of VM token ``secret_id`` if it is one of ours: in the vault
        and tagged as a relay's."""
        if not (secret_id and self.vault):
            return
        vaults = await self._client(oci.vault.VaultsClient, config)
        try:
            secret = (await self._call(vaults.get_secret, secret_id, instance_call=True)).data
        except InstanceNotFound:
            return
        tags = dict(secret.freeform_tags or {})
        ours = secret.vault_id == self.vault and tags.get(TAG_MANAGED_BY) == MANAGED_BY_VALUE
        if not ours or str(secret.lifecycle_state) not in _LIVE_SECRET_STATES:
            return
        when = self.clock() + _SECRET_DELETION_DELAY
        await self._call(
            vaults.schedule_secret_deletion,
            secret_id,
            oci.vault.models.ScheduleSecretDeletionDetails(time_of_deletion=when),
        )

    async def _instances(self, compute: Any, compartment: str) -> builtins.list[Any]:
        listed = await self._call(
            oci.pagination.list_call_get_all_results,
            compute.list_instances,
            compartment_id=compartment,
        )
        return list(listed.data)

    async def _report(
        self, config: dict[str, Any], compartment: str, instance: Any, region: str
    ) -> CloudInstance:
        state = map_state(str(instance.lifecycle_state))
        ip = ""
        if state in ("pending", "running"):
            try:
                ip = await self._public_ip(config, compartment, str(instance.id))
            except DriverError:
                ip = ""  # non-fatal: the next pass asks again
        created = instance.time_created
        return CloudInstance(
            instance_id=str(instance.id),
            region=region,
            state=state,
            public_ip=ip,
            tags=dict(instance.freeform_tags or {}),
            launched_at=created if isinstance(created, datetime) else None,
        )

    async def _secret(self) -> dict[str, str]:
        if self.kube is None:
            raise ConfigurationError(f"no Kubernetes client to read Secret {self.secret_name}")
        secret = await self.kube.get_or_none(SECRETS, self.secret_name, self.namespace)
        if secret is None:
            raise ConfigurationError(
                f"Secret {self.secret_name} not found in namespace {self.namespace}",
                f"create Secret {self.secret_name} with tenancy, user, fingerprint, key, subnet",
            )
        return {
            key: base64.b64decode(value).decode().strip()
            for key, value in (secret.get("data") or {}).items()
            if value
        }

    async def _config(self, data: dict[str, str], region: str) -> dict[str, Any]:
        """``oci_config`` in a worker thread: checking the config parses the API key."""
        return await asyncio.to_thread(
            functools.partial(
                oci_config,
                data,
                region,
                secret_name=self.secret_name,
                default_region=self.default_region,
            )
        )

    async def _client(self, kind: Callable[..., T], config: dict[str, Any]) -> T:
        """A new SDK client, built in a worker thread: construction loads the service model
        and parses the API key, tens of milliseconds the event loop must not spend."""
        kwargs: dict[str, Any] = {"timeout": (10, 30)}
        if self.endpoint:
            kwargs["service_endpoint"] = self.endpoint
        return await asyncio.to_thread(functools.partial(kind, config, **kwargs))

    async def _call(
        self, fn: Callable[..., T], *args: Any, instance_call: bool = False, **kwargs: Any
    ) -> T:
        try:
            return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
        except oci.exceptions.ServiceError as err:
            raise classify_status(
                int(err.status), str(err.code), str(err.message), instance_call=instance_call
            ) from err
        except oci.exceptions.RequestException as err:
            raise TransientCloudError(f"OCI API error: {truncate(str(err))}") from err

    async def _image(self, compute: Any, compartment: str, shape: str) -> str:
        images = await self._call(
            compute.list_images,
            compartment_id=compartment,
            operating_system="Canonical Ubuntu",
            operating_system_version="22.04",
            shape=shape,
            sort_by="TIMECREATED",
            sort_order="DESC",
        )
        if not images.data:
            raise ConfigurationError(
                f"OCI: no Canonical Ubuntu 22.04 image for shape {shape}",
                f"add key image (an image OCID) to Secret {self.secret_name}",
            )
        return str(images.data[0].id)

    async def _public_ip(self, config: dict[str, Any], compartment: str, instance_id: str) -> str:
        compute = await self._client(oci.core.ComputeClient, config)
        network = await self._client(oci.core.VirtualNetworkClient, config)
        attachments = await self._call(
            compute.list_vnic_attachments, compartment_id=compartment, instance_id=instance_id
        )
        for attachment in attachments.data:
            if attachment.lifecycle_state != "ATTACHED":
                continue
            vnic = await self._call(network.get_vnic, attachment.vnic_id)
            if vnic.data.public_ip:
                return str(vnic.data.public_ip)
        return ""
