"""The AWS driver: EC2 through boto3, every SDK call in a worker thread.

Credentials are re-read on every call from the ``aws-relay-irwa`` Secret (``accessKeyId``,
``secretAccessKey``), or come from boto3's default chain (IRSA, environment, instance
metadata) when the Secret or a key is missing. The launch carries a ``ClientToken``, so a
retried launch after a crash returns the same instance instead of a second one, and the VM
image follows the shape's architecture (the reference always booted arm64).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

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
from controller.relay.drivers.ec2_setup import (
    DEFAULT_IMAGE,
    ImageQuery,
    find_image,
    security_group,
)
from controller.relay.shapes import arch_for_shape, default_shape
from controller.toolkit.clock import Clock, utc_now
from wspin.resources import SECRETS, Kube

SECRET_NAME: Final = "aws-relay-irwa"  # noqa: S105 (a Secret name)
DEFAULT_REGION: Final = "us-east-1"

_CAPACITY_CODES: Final = ("InsufficientInstanceCapacity", "InstanceLimitExceeded")
_RATE_CODES: Final = ("RequestLimitExceeded", "Throttling")
_CONFIG_CODES: Final = (
    "InvalidParameterValue",
    "InvalidAMIID",
    "UnauthorizedOperation",
    "AccessDenied",
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "Unsupported",
)
_STATES: Final[dict[str, VMState]] = {
    "pending": "pending",
    "running": "running",
    "stopping": "stopping",
    "stopped": "stopped",
    "shutting-down": "terminated",
    "terminated": "terminated",
}
MAX_LAUNCH_ATTEMPTS: Final = 8

T = TypeVar("T")


def classify(err: Exception, what: str) -> DriverError:
    """Map a boto error to the driver error classes by its AWS error code."""
    if isinstance(err, NoCredentialsError):
        return ConfigurationError(
            f"{what}: no AWS credentials",
            f"put accessKeyId/secretAccessKey in Secret {SECRET_NAME} or give the pod IRSA",
        )
    if isinstance(err, ClientError):
        code = str(err.response.get("Error", {}).get("Code", ""))
        text = truncate(f"{what}: {code}: {err.response.get('Error', {}).get('Message', '')}")
        if any(code.startswith(c) for c in _CAPACITY_CODES):
            return CapacityError(text)
        if any(code.startswith(c) for c in _RATE_CODES):
            return CapacityError(f"rate limited: {text}")
        if any(code.startswith(c) for c in _CONFIG_CODES):
            return ConfigurationError(text)
        return DriverError(f"AWS API error: {text}")
    return DriverError(f"AWS API error: {what}: {truncate(str(err))}")


def attempt_token(client_token: str, attempt: int) -> str:
    """The ClientToken of launch ``attempt`` (0 = the request's own), at most 64 characters."""
    if not client_token or attempt == 0:
        return client_token[:64]
    return f"{client_token[:60]}-{attempt:03d}"


def map_state(name: str) -> VMState:
    return _STATES.get(name, "pending")


class AwsDriver:
    """``ProviderDriver`` for EC2."""

    def __init__(
        self,
        kube: Kube | None,
        namespace: str,
        *,
        secret_name: str = SECRET_NAME,
        image: ImageQuery = DEFAULT_IMAGE,
        poll_seconds: float = 10.0,
        timeout_seconds: float = 300.0,
        clock: Clock = utc_now,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret_name = secret_name
        self.image = image
        self.poll_seconds = poll_seconds
        self.timeout_seconds = timeout_seconds
        self.clock = clock
        self.sleep = sleep
        self._clients: dict[tuple[str, str, str], Any] = {}

    # -- ProviderDriver -----------------------------------------------------------------------

    async def provision(self, request: ProvisionRequest) -> ProvisionResult:
        region = request.region or DEFAULT_REGION
        ec2 = await self._client(region)
        instance = await self._launch(ec2, request)
        instance_id = str(instance["InstanceId"])
        try:
            return await self._wait_running(ec2, instance_id)
        except DriverError as err:
            try:
                await self._call(ec2.terminate_instances, what="cleanup", InstanceIds=[instance_id])
            except DriverError as cleanup:
                raise DriverError(
                    f"{err}; terminating {instance_id} also failed: {cleanup}"
                ) from err
            raise

    async def _launch(self, ec2: Any, request: ProvisionRequest) -> dict[str, Any]:
        """Run the instance, or return the live one an earlier attempt ran with this token.

        EC2 answers a repeated ClientToken with the original instance even once it is
        terminated (a launch whose wait failed was terminated above). So the driver walks a
        fixed sequence of tokens derived from the request's and uses the first one that has
        not produced a dead instance: retries stay idempotent, across restarts too.
        """
        used = await self._launches_by_token(ec2, request)
        for attempt in range(MAX_LAUNCH_ATTEMPTS):
            token = attempt_token(request.client_token, attempt)
            states = used.get(token, []) if token else []
            live = [i for i in states if map_state(i["State"]["Name"]) in ("pending", "running")]
            if live:
                return live[0]
            if states:
                continue  # this token's launch died: the next token launches a fresh one
            instance = await self._run(ec2, request, token)
            if not token or map_state(instance["State"]["Name"]) != "terminated":
                return instance
        raise DriverError(
            f"run instance: {MAX_LAUNCH_ATTEMPTS} launches for this VM token all failed",
            "a later pass retries with a fresh token after the slot is replaced",
        )

    async def _run(self, ec2: Any, request: ProvisionRequest, token: str) -> dict[str, Any]:
        shape = request.shape or default_shape("aws")
        arch = request.arch or arch_for_shape("aws", shape)
        image_id = await self._call(find_image, ec2, self.image, arch, what="find relay image")
        group_id = await self._call(security_group, ec2, what="find security group")
        tags = [{"Key": "Name", "Value": request.name}] + [
            {"Key": k, "Value": v} for k, v in vm_tags(request.owner_uid, request.provider).items()
        ]
        launch: dict[str, Any] = {
            "ImageId": image_id,
            "InstanceType": shape,
            "MinCount": 1,
            "MaxCount": 1,
            # boto3 base64-encodes UserData itself: pass the document, not our base64.
            "UserData": base64.b64decode(request.cloud_init).decode(),
            "SecurityGroupIds": [group_id],
            "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}],
        }
        if token:
            launch["ClientToken"] = token
        reply = await self._call(ec2.run_instances, what="run instance", **launch)
        if not reply.get("Instances"):
            raise ConfigurationError("run instance: AWS returned no instance")
        instance: dict[str, Any] = reply["Instances"][0]
        return instance

    async def destroy(self, instance_id: str, region: str) -> None:
        ec2 = await self._client(region or DEFAULT_REGION)
        try:
            await self._call(
                ec2.terminate_instances, what="terminate instance", InstanceIds=[instance_id]
            )
        except DriverError as err:
            if "InvalidInstanceID.NotFound" in str(err):
                return  # already gone: destroy is idempotent
            raise

    async def get_status(self, instance_id: str, region: str) -> InstanceStatus:
        return await self._status_with(await self._client(region or DEFAULT_REGION), instance_id)

    async def list_instances(self, region: str) -> list[CloudInstance]:
        region = region or DEFAULT_REGION
        ec2 = await self._client(region)
        filters = [{"Name": f"tag:{TAG_MANAGED_BY}", "Values": [MANAGED_BY_VALUE]}]
        instances = await self._call(self._describe_all, ec2, filters, what="list instances")
        return [_listed(instance, region) for instance in instances]

    # -- internals ----------------------------------------------------------------------------

    async def _client(self, region: str) -> Any:
        """An EC2 client for ``region`` with the current credentials (cached per both:
        building a client loads the service model, which takes most of a second)."""
        access_key, secret_key = await self._static_credentials()
        key = (region, access_key, hashlib.sha256(secret_key.encode()).hexdigest())
        cached = self._clients.get(key)
        if cached is not None:
            return cached

        def build() -> Any:
            if access_key and secret_key:
                session = boto3.session.Session(
                    aws_access_key_id=access_key,
                    aws_secret_access_key=secret_key,
                    region_name=region,
                )
            else:
                session = boto3.session.Session(region_name=region)
            return session.client("ec2")

        try:
            client = await asyncio.to_thread(build)
        except (BotoCoreError, ValueError) as err:
            raise ConfigurationError(f"AWS client for {region}: {err}") from err
        self._clients[key] = client
        return client

    async def _static_credentials(self) -> tuple[str, str]:
        if self.kube is None:
            return "", ""
        secret = await self.kube.get_or_none(SECRETS, self.secret_name, self.namespace)
        data = (secret or {}).get("data") or {}

        def value(key: str) -> str:
            raw = data.get(key)
            return base64.b64decode(raw).decode().strip() if raw else ""

        return value("accessKeyId"), value("secretAccessKey")

    async def _call(self, fn: Callable[..., T], *args: Any, what: str, **kwargs: Any) -> T:
        try:
            return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))
        except DriverError:
            raise
        except (ClientError, BotoCoreError) as err:
            raise classify(err, what) from err

    async def _launches_by_token(
        self, ec2: Any, request: ProvisionRequest
    ) -> dict[str, list[dict[str, Any]]]:
        """This owner's instances in every state the listing still shows, by ClientToken."""
        if not request.client_token or not request.owner_uid:
            return {}
        filters = [{"Name": f"tag:{TAG_OWNER_UID}", "Values": [request.owner_uid]}]
        found = await self._call(self._describe_all, ec2, filters, what="find earlier launch")
        by_token: dict[str, list[dict[str, Any]]] = {}
        for instance in found:
            if instance.get("ClientToken"):
                by_token.setdefault(str(instance["ClientToken"]), []).append(instance)
        return by_token

    @staticmethod
    def _describe_all(ec2: Any, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        instances: list[dict[str, Any]] = []
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                instances.extend(reservation.get("Instances", []))
        return instances

    async def _wait_running(self, ec2: Any, instance_id: str) -> ProvisionResult:
        started = self.clock()
        while True:
            status = await self._status_with(ec2, instance_id)
            if status.state == "running" and status.public_ip:
                return ProvisionResult(instance_id, status.public_ip)
            # "not-found" is not fatal: EC2 does not know a new instance for a few seconds
            # after RunInstances; the deadline still bounds the wait.
            if status.state in ("terminated", "stopped"):
                raise ConfigurationError(
                    f"instance {instance_id} became {status.state} while booting"
                )
            if (self.clock() - started).total_seconds() >= self.timeout_seconds:
                raise ProvisionTimeout(
                    f"instance {instance_id} not running with a public IP after "
                    f"{self.timeout_seconds:.0f}s"
                )
            await self.sleep(self.poll_seconds)

    async def _status_with(self, ec2: Any, instance_id: str) -> InstanceStatus:
        try:
            reply = await self._call(
                ec2.describe_instances, what="describe instance", InstanceIds=[instance_id]
            )
        except DriverError as err:
            if "InvalidInstanceID.NotFound" in str(err):
                return InstanceStatus(instance_id, "not-found")
            raise
        for reservation in reply.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("InstanceId") == instance_id:
                    return InstanceStatus(
                        instance_id,
                        map_state(instance.get("State", {}).get("Name", "")),
                        str(instance.get("PublicIpAddress") or ""),
                    )
        return InstanceStatus(instance_id, "not-found")


def _listed(instance: dict[str, Any], region: str) -> CloudInstance:
    tags = {t.get("Key", ""): t.get("Value", "") for t in instance.get("Tags") or []}
    launched = instance.get("LaunchTime")
    return CloudInstance(
        instance_id=str(instance.get("InstanceId", "")),
        region=region,
        state=map_state(str(instance.get("State", {}).get("Name", ""))),
        public_ip=str(instance.get("PublicIpAddress") or ""),
        owner_uid=tags.get(TAG_OWNER_UID, ""),
        provider=tags.get(TAG_PROVIDER, ""),
        launched_at=launched if isinstance(launched, datetime) else None,
    )
