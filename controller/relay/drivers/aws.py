"""The AWS driver: EC2 through boto3, every SDK call in a worker thread.

Credentials are re-read on every call from the ``aws-relay-irwa`` Secret (``accessKeyId``,
``secretAccessKey``), or come from boto3's default chain (IRSA, environment, instance
metadata) when the Secret or a key is missing. A launch is idempotent twice over: the
instance a launch tag already names is returned without a second RunInstances, and the call
itself carries the client token as ``ClientToken``, which EC2 answers with the original
instance. The VM image follows the shape's architecture.

The VM token is a SecureString parameter in SSM Parameter Store, named
``<prefix>/<InferenceRelay uid>/<launch>`` and tagged like the VM; the VM boots with the
instance profile ``--relay-aws-instance-profile`` and reads it with the aws CLI (the image must
have it; the profile's role needs ``ssm:GetParameter`` on the prefix, and ``kms:Decrypt`` when
the parameter's key is not ``aws/ssm``). ``destroy`` deletes the parameter the VM's tag names,
and only under the prefix: a tag anyone with ``ec2:CreateTags`` edits cannot point it at
another parameter.

Errors are classed by EC2's error code, once, here (``classify``).
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import functools
import hashlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypeVar

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from controller.relay.drivers.base import (
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
    truncate,
)
from controller.relay.drivers.ec2_setup import (
    DEFAULT_IMAGE,
    ImageQuery,
    find_image,
    security_group,
)
from wspin.core.kinds import SECRETS
from wspin.kube.client import Kube

_NOT_FOUND_CODES: Final = ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")
_QUOTA_CODES: Final = ("InsufficientInstanceCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded")
_RATE_CODES: Final = ("RequestLimitExceeded", "Throttling")
_CONFIG_CODES: Final = (
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidAMIID",
    "InvalidGroup",
    "UnauthorizedOperation",
    "AccessDenied",
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "OptInRequired",
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

DEFAULT_PARAMETER_PREFIX: Final = "/llmsafespaces/relay-token"
_PARAMETER_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/"
)

T = TypeVar("T")


def classify(err: Exception, what: str, secret_name: str) -> DriverError:
    """Map a boto error to the driver error classes by its EC2 error code (``secret_name``:
    the credentials Secret a missing-credentials error names)."""
    if isinstance(err, NoCredentialsError):
        return ConfigurationError(
            f"{what}: no AWS credentials",
            f"put accessKeyId/secretAccessKey in Secret {secret_name} or give the pod IRSA",
        )
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        text = truncate(f"{what}: {code}: {error.get('Message', '')}")
        if code in _NOT_FOUND_CODES:
            return InstanceNotFound(text)
        if any(code.startswith(c) for c in _QUOTA_CODES):
            return QuotaExceeded(text)
        if any(code.startswith(c) for c in _RATE_CODES):
            return Throttled(text)
        if any(code.startswith(c) for c in _CONFIG_CODES):
            return ConfigurationError(text)
        return TransientCloudError(f"AWS API error: {text}")
    return TransientCloudError(f"AWS API error: {what}: {truncate(str(err))}")


def map_state(name: str) -> VMState:
    return _STATES.get(name, "pending")


class AwsDriver:
    """``Driver`` for EC2."""

    def __init__(
        self,
        kube: Kube | None,
        namespace: str,
        *,
        secret_name: str,
        default_region: str,
        image: ImageQuery = DEFAULT_IMAGE,
        instance_profile: str = "",
        parameter_prefix: str = DEFAULT_PARAMETER_PREFIX,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret_name = secret_name
        """The credentials Secret (its ``providers`` entry names it)."""
        self.default_region = default_region
        self.image = image
        self.instance_profile = instance_profile
        """``--relay-aws-instance-profile``: name or ARN of the profile the VM reads its token
        with ("" launches without one; only tests do)."""
        self.parameter_prefix = parameter_prefix.rstrip("/")
        """``--relay-aws-token-prefix``: every token parameter lives under it."""
        self._clients: dict[tuple[str, str, str, str], Any] = {}

    # -- Driver -------------------------------------------------------------------------------

    async def store_token(self, slot: TokenSlot, token: str) -> TokenRef:
        if not self.instance_profile:
            raise ConfigurationError(
                "no instance profile for relay VMs on AWS: the VM could not read its token",
                "set --relay-aws-instance-profile / "
                "controller.inferenceRelay.tokenStore.aws.instanceProfile",
            )
        region = slot.region or self.default_region
        name = f"{self.parameter_prefix}/{slot.owner_uid}/{slot.launch[:32]}"
        if not set(name) <= _PARAMETER_CHARS:
            raise ConfigurationError(f"token parameter name {name!r} has characters SSM refuses")
        ssm = await self._client(region, "ssm")
        tags = [{"Key": k, "Value": v} for k, v in slot.tags.items()]
        put = {"Name": name, "Value": token, "Type": "SecureString", "Tier": "Standard"}
        try:
            await self._call(ssm.put_parameter, what="store VM token", Tags=tags, **put)
        except DriverError as err:
            cause = err.__cause__
            if not (isinstance(cause, ClientError) and _code(cause) == "ParameterAlreadyExists"):
                raise
            # The same launch again (a retry): overwrite; SSM refuses tags with Overwrite,
            # and the first put's are still on it.
            await self._call(ssm.put_parameter, what="store VM token", Overwrite=True, **put)
        fetch = (
            f"aws ssm get-parameter --region {shlex.quote(region)} --name {shlex.quote(name)} "
            "--with-decryption --query Parameter.Value --output text"
        )
        return TokenRef(reference=name, fetch=fetch)

    async def launch(self, request: LaunchRequest) -> str:
        ec2 = await self._client(request.region or self.default_region)
        if request.client_token:
            earlier = await self._call(
                self._describe_all,
                ec2,
                [{"Name": f"tag:{TAG_LAUNCH}", "Values": [request.client_token]}],
                what="find an earlier launch",
            )
            if earlier:
                return str(earlier[0]["InstanceId"])
        if not request.shape or not request.arch:
            raise ConfigurationError("launch request without a shape and its architecture")
        shape, arch = request.shape, request.arch
        image_id = await self._call(find_image, ec2, self.image, arch, what="find relay image")
        group_id = await self._call(security_group, ec2, what="find security group")
        tags = [{"Key": "Name", "Value": request.name}] + [
            {"Key": k, "Value": v} for k, v in request.tags.items()
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
            # The metadata service hands out the role's credentials, which read the token:
            # IMDSv2 only (no plain GET reads them) and one hop (nothing forwarded through
            # the VM does either).
            "MetadataOptions": {
                "HttpEndpoint": "enabled",
                "HttpTokens": "required",
                "HttpPutResponseHopLimit": 1,
            },
        }
        if self.instance_profile:
            profile = "Arn" if self.instance_profile.startswith("arn:") else "Name"
            launch["IamInstanceProfile"] = {profile: self.instance_profile}
        if request.client_token:
            launch["ClientToken"] = request.client_token[:64]
        reply = await self._call(ec2.run_instances, what="run instance", **launch)
        if not reply.get("Instances"):
            raise TransientCloudError("run instance: AWS returned no instance")
        return str(reply["Instances"][0]["InstanceId"])

    async def describe(self, instance_id: str, region: str) -> CloudInstance:
        region = region or self.default_region
        ec2 = await self._client(region)
        reply = await self._call(
            ec2.describe_instances, what="describe instance", InstanceIds=[instance_id]
        )
        for reservation in reply.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("InstanceId") == instance_id:
                    return _instance(instance, region)
        raise InstanceNotFound(f"describe instance: {instance_id} is not in {region}")

    async def destroy(self, instance_id: str, region: str) -> None:
        region = region or self.default_region
        try:
            vm = await self.describe(instance_id, region)
        except InstanceNotFound:
            return  # already gone (and its token with it): destroy is idempotent
        ec2 = await self._client(region)
        with contextlib.suppress(InstanceNotFound):  # gone meanwhile
            await self._call(
                ec2.terminate_instances, what="terminate instance", InstanceIds=[instance_id]
            )
        await self._delete_token(vm.tags.get(TAG_TOKEN_REF, ""), region)

    async def list(
        self, tags: Mapping[str, str], regions: Sequence[str]
    ) -> builtins.list[CloudInstance]:
        filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]
        if TAG_MANAGED_BY not in tags:
            filters.append({"Name": "tag-key", "Values": [TAG_MANAGED_BY]})
        found: builtins.list[CloudInstance] = []
        for region in regions or [self.default_region]:
            ec2 = await self._client(region)
            instances = await self._call(self._describe_all, ec2, filters, what="list instances")
            found.extend(_instance(instance, region) for instance in instances)
        return found

    # -- internals ----------------------------------------------------------------------------

    async def _delete_token(self, name: str, region: str) -> None:
        """Delete token parameter ``name`` if it is one of ours (under the prefix)."""
        if not name.startswith(self.parameter_prefix + "/") or ".." in name:
            return
        ssm = await self._client(region, "ssm")
        try:
            await self._call(ssm.delete_parameter, what="delete VM token", Name=name)
        except DriverError as err:
            cause = err.__cause__
            if not (isinstance(cause, ClientError) and _code(cause) == "ParameterNotFound"):
                raise

    async def _client(self, region: str, service: str = "ec2") -> Any:
        """A ``service`` client for ``region`` with the current credentials (cached per
        all three: building a client loads the service model, most of a second)."""
        access_key, secret_key = await self._static_credentials()
        key = (service, region, access_key, hashlib.sha256(secret_key.encode()).hexdigest())
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
            return session.client(service)

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
            raise classify(err, what, self.secret_name) from err

    @staticmethod
    def _describe_all(
        ec2: Any, filters: builtins.list[dict[str, Any]]
    ) -> builtins.list[dict[str, Any]]:
        instances: builtins.list[dict[str, Any]] = []
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                instances.extend(reservation.get("Instances", []))
        return instances


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _instance(instance: dict[str, Any], region: str) -> CloudInstance:
    tags = {t.get("Key", ""): t.get("Value", "") for t in instance.get("Tags") or []}
    launched = instance.get("LaunchTime")
    return CloudInstance(
        instance_id=str(instance.get("InstanceId", "")),
        region=region,
        state=map_state(str(instance.get("State", {}).get("Name", ""))),
        public_ip=str(instance.get("PublicIpAddress") or ""),
        tags=tags,
        launched_at=launched if isinstance(launched, datetime) else None,
    )
