"""The OCI driver: Oracle Cloud compute through the ``oci`` SDK, calls in a worker thread.

The SDK signs requests (OCI signature version 1) and parses the API key, which the
reference did by hand. Credentials come from the ``oci-credentials`` Secret (``tenancy``,
``user``, ``fingerprint``, ``key`` as PEM, optional ``region``, ``compartment`` and
``subnet``); a missing key or one the SDK cannot parse is a configuration error. The image is
the newest Canonical Ubuntu 22.04 build OCI lists as compatible with the shape, so the CPU
architecture always matches (the reference hard-coded an arm64 image per region). Unlike
AWS, a failed wait leaves the VM running: tag-based adoption picks it up on a later pass.
"""

from __future__ import annotations

import asyncio
import base64
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar

import oci

from controller.relay.drivers.base import (
    MANAGED_BY_VALUE,
    TAG_MANAGED_BY,
    TAG_OWNER_UID,
    TAG_PROVIDER,
    CapacityError,
    CloudInstance,
    ConfigurationError,
    DriverError,
    InstanceStatus,
    ProvisionRequest,
    ProvisionResult,
    ProvisionTimeout,
    VMState,
    truncate,
    vm_tags,
)
from controller.relay.shapes import default_shape
from controller.toolkit.clock import Clock, utc_now
from wspin.resources import SECRETS, Kube

SECRET_NAME: Final = "oci-credentials"  # noqa: S105 (a Secret name)
DEFAULT_REGION: Final = "us-ashburn-1"
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

T = TypeVar("T")


def map_state(lifecycle: str) -> VMState:
    return _STATES.get(lifecycle.lower(), "pending")


def freeform_tags(owner_uid: str, provider: str) -> dict[str, str]:
    """OCI freeform tags: managed-by always, owner and provider when given."""
    return vm_tags(owner_uid, provider)


def classify_status(status: int, text: str) -> DriverError:
    """Map an OCI API status to the driver error classes."""
    message = truncate(text)
    if status in (429, 500, 503):
        return CapacityError(f"OCI: {message}")
    if status in (400, 401, 403, 404, 409, 422):
        return ConfigurationError(f"OCI: {message}")
    return DriverError(f"OCI API error: {message}")


def oci_config(data: dict[str, str], region: str) -> dict[str, Any]:
    """The SDK config from the Secret's decoded data; raises ``ConfigurationError``."""
    missing = [key for key in REQUIRED_KEYS if not data.get(key)]
    if missing:
        raise ConfigurationError(
            f"Secret {SECRET_NAME} lacks {', '.join(missing)}",
            f"add {', '.join(missing)} to Secret {SECRET_NAME}",
        )
    config = {
        "tenancy": data["tenancy"],
        "user": data["user"],
        "fingerprint": data["fingerprint"],
        "key_content": data["key"],
        "region": region or data.get("region") or DEFAULT_REGION,
    }
    try:
        oci.config.validate_config(config)
        oci.signer.Signer(
            config["tenancy"], config["user"], config["fingerprint"], None,
            private_key_content=config["key_content"],
        )  # fmt: skip
    except (oci.exceptions.InvalidConfig, oci.exceptions.InvalidPrivateKey, ValueError) as err:
        raise ConfigurationError(
            f"Secret {SECRET_NAME}: unusable OCI API key or config: {truncate(str(err))}",
            f"put the PEM API signing key in Secret {SECRET_NAME} key 'key'",
        ) from err
    return config


class OciDriver:
    """``ProviderDriver`` for OCI compute."""

    def __init__(
        self,
        kube: Kube | None,
        namespace: str,
        *,
        secret_name: str = SECRET_NAME,
        endpoint: str | None = None,
        poll_seconds: float = 10.0,
        timeout_seconds: float = 300.0,
        clock: Clock = utc_now,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret_name = secret_name
        self.endpoint = endpoint
        """Override of every service endpoint (tests point it at a loopback server)."""
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.clock = clock
        self.sleep = sleep

    async def provision(self, request: ProvisionRequest) -> ProvisionResult:
        data = await self._secret()
        config = await self._config(data, request.region)
        compartment = data.get("compartment") or config["tenancy"]
        subnet = data.get("subnet", "")
        if not subnet:
            raise ConfigurationError(
                f"Secret {SECRET_NAME} lacks 'subnet' (the OCID relay VMs attach to)",
                f"add key subnet to Secret {SECRET_NAME}",
            )
        shape = request.shape or default_shape("oci")
        compute = await self._client(oci.core.ComputeClient, config)
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
            freeform_tags=freeform_tags(request.owner_uid, request.provider),
        )
        kwargs = {"opc_retry_token": request.client_token} if request.client_token else {}
        launched = await self._call(compute.launch_instance, details, **kwargs)
        instance_id = str(launched.data.id)
        started = self.clock()
        while True:
            status = await self._status(compute, instance_id)
            if status.state == "running":
                ip = await self._public_ip(config, compartment, instance_id)
                if ip:
                    return ProvisionResult(instance_id, ip)
            elif status.state in ("terminated", "not-found"):
                raise ConfigurationError(f"OCI instance {instance_id} became {status.state}")
            if (self.clock() - started).total_seconds() >= self.timeout_seconds:
                raise ProvisionTimeout(
                    f"OCI instance {instance_id} not running with a public IP after "
                    f"{self.timeout_seconds:.0f}s"
                )
            await self.sleep(self.poll_seconds)

    async def destroy(self, instance_id: str, region: str) -> None:
        config = await self._config(await self._secret(), region)
        compute = await self._client(oci.core.ComputeClient, config)
        try:
            await self._call(compute.terminate_instance, instance_id)
        except ConfigurationError as err:
            if "404" in str(err):
                return  # already gone
            raise

    async def get_status(self, instance_id: str, region: str) -> InstanceStatus:
        config = await self._config(await self._secret(), region)
        compute = await self._client(oci.core.ComputeClient, config)
        return await self._status(compute, instance_id)

    async def list_instances(self, region: str) -> list[CloudInstance]:
        data = await self._secret()
        config = await self._config(data, region)
        compartment = data.get("compartment") or config["tenancy"]
        compute = await self._client(oci.core.ComputeClient, config)
        listed = await self._call(
            oci.pagination.list_call_get_all_results,
            compute.list_instances,
            compartment_id=compartment,
        )
        result = []
        for instance in listed.data:
            tags = dict(instance.freeform_tags or {})
            if tags.get(TAG_MANAGED_BY) != MANAGED_BY_VALUE:
                continue
            state = map_state(str(instance.lifecycle_state))
            ip = ""
            if state in ("pending", "running"):
                try:
                    ip = await self._public_ip(config, compartment, str(instance.id))
                except DriverError:
                    ip = ""  # non-fatal: the next pass asks again
            created = instance.time_created
            result.append(
                CloudInstance(
                    instance_id=str(instance.id),
                    region=region,
                    state=state,
                    public_ip=ip,
                    owner_uid=tags.get(TAG_OWNER_UID, ""),
                    provider=tags.get(TAG_PROVIDER, ""),
                    launched_at=created if isinstance(created, datetime) else None,
                )
            )
        return result

    # -- internals ----------------------------------------------------------------------------

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
        return await asyncio.to_thread(oci_config, data, region)

    async def _client(self, kind: Callable[..., T], config: dict[str, Any]) -> T:
        """A new SDK client, built in a worker thread: construction loads the service model
        and parses the API key, tens of milliseconds the event loop must not spend."""
        kwargs: dict[str, Any] = {"timeout": (10, 30)}
        if self.endpoint:
            kwargs["service_endpoint"] = self.endpoint
        return await asyncio.to_thread(functools.partial(kind, config, **kwargs))

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
        except oci.exceptions.ServiceError as err:
            raise classify_status(
                int(err.status), f"{err.status} {err.code}: {err.message}"
            ) from err
        except oci.exceptions.RequestException as err:
            raise DriverError(f"OCI API error: {truncate(str(err))}") from err

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
                f"add key image (an image OCID) to Secret {SECRET_NAME}",
            )
        return str(images.data[0].id)

    async def _status(self, compute: Any, instance_id: str) -> InstanceStatus:
        try:
            reply = await self._call(compute.get_instance, instance_id)
        except ConfigurationError as err:
            if str(err).startswith("OCI: 404"):
                return InstanceStatus(instance_id, "not-found")
            raise
        return InstanceStatus(instance_id, map_state(str(reply.data.lifecycle_state)))

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
