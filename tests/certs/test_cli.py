"""``wspin certs generate`` and ``wspin certs patch-ca-bundle`` as a user runs them."""

from __future__ import annotations

import asyncio
import base64
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from certs.build import dns_names_of, load_certificates, new_ca, signed_by
from tests.certs.conftest import NOW, Webhooks
from wspin.core.kinds import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from wspin.kube.client import Kube
from wspinctl.cli import main


def test_generate_writes_a_ca_and_a_leaf_for_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    assert (
        main(["certs", "generate", "--service", "hook", "--namespace", "ns", "--out", str(out)])
        == 0
    )
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert signed_by(leaf, ca)
    assert dns_names_of(leaf) == ["hook", "hook.ns", "hook.ns.svc", "hook.ns.svc.cluster.local"]
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(out / "tls.crt", out / "tls.key")  # the key matches
    assert capsys.readouterr().out.split() == [
        str(out / n) for n in ("ca.crt", "tls.crt", "tls.key")
    ]


def test_generate_follows_no_symlink_planted_in_the_output_directory(tmp_path: Path) -> None:
    """Someone who can write --out plants links at the targets and at the old predictable
    temporary names; ``generate`` writes none of its bytes through any of them."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    out = tmp_path / "certs"
    out.mkdir()
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (out / name).symlink_to(victim)
        (out / f".{name}.partial").symlink_to(victim)
        (out / f".{name}.tmp").symlink_to(victim)
    argv = ["certs", "generate", "--service", "hook", "--namespace", "ns", "--out", str(out)]
    assert main(argv) == 0
    assert victim.read_bytes() == b"untouched"
    for name in ("ca.crt", "tls.crt", "tls.key"):
        assert not (out / name).is_symlink()
    assert b"PRIVATE KEY" in (out / "tls.key").read_bytes()
    left = sorted(p.name for p in out.iterdir() if not p.is_symlink())
    assert left == ["ca.crt", "tls.crt", "tls.key"]  # no temporary file left behind


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--namespace", "ns", "--out", "x"], "--service is required"),
        (["--service", "Hook", "--namespace", "ns", "--out", "x"], "--service 'Hook' is not"),
        (["--service", "hook", "--namespace", "ns"], "--out is required"),
    ],
)
def test_generate_rejects_bad_flags_with_exit_1(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert main(["certs", "generate", *argv]) == 1
    assert message in capsys.readouterr().err


def test_generate_into_an_unwritable_place_names_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["certs", "generate", "--service", "hook", "--namespace", "ns", "--out", str(blocker)]
    assert main(argv) == 1
    assert "pass --out naming a writable directory" in capsys.readouterr().err


async def test_patch_ca_bundle_sets_both_configurations_and_is_idempotent(
    kube: Kube,
    webhooks: Webhooks,
    kubeconfig: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ca = new_ca(NOW)
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    argv = [
        "certs",
        "patch-ca-bundle",
        "--mutating",
        webhooks.mutating,
        "--validating",
        webhooks.validating,
        "--ca-file",
        str(tmp_path / "ca.crt"),
        "--kubeconfig",
        str(kubeconfig),
    ]
    assert await asyncio.to_thread(main, argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"MutatingWebhookConfiguration {webhooks.mutating}: patched",
        f"ValidatingWebhookConfiguration {webhooks.validating}: patched",
    ]
    for resource, name in (
        (MUTATING_WEBHOOKS, webhooks.mutating),
        (VALIDATING_WEBHOOKS, webhooks.validating),
    ):
        for entry in (await kube.get(resource, name))["webhooks"]:
            bundle = base64.b64decode(entry["clientConfig"]["caBundle"])
            assert load_certificates(bundle, "caBundle") == [ca.cert]
    assert await asyncio.to_thread(main, argv) == 0
    assert "already current" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("leaf", "holds a certificate that is not a CA"),
        ("garbage", "holds no readable PEM certificate"),
        ("missing", "cannot read --ca-file"),
        ("unknown-config", "webhook configuration not found"),
    ],
)
async def test_patch_ca_bundle_refuses_bad_input_with_exit_1(
    what: str,
    message: str,
    kubeconfig: Path,
    webhooks: Webhooks,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ca_file = tmp_path / "ca.crt"
    name = webhooks.mutating
    if what == "leaf":
        assert (
            main(
                ["certs", "generate", "--service", "h", "--namespace", "n", "--out", str(tmp_path)]
            )
            == 0
        )
        ca_file = tmp_path / "tls.crt"
    elif what == "garbage":
        ca_file.write_text("not pem")
    elif what == "unknown-config":
        ca_file.write_bytes(new_ca(NOW).cert_pem)
        name = "wspin-no-such-configuration"
    argv = [
        "certs",
        "patch-ca-bundle",
        "--mutating",
        name,
        "--ca-file",
        str(ca_file),
        "--kubeconfig",
        str(kubeconfig),
    ]
    assert await asyncio.to_thread(main, argv) == 1
    assert message in capsys.readouterr().err


def test_patch_ca_bundle_needs_a_configuration_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "patch-ca-bundle", "--ca-file", "x"]) == 1
    assert "pass --mutating NAME and/or --validating NAME" in capsys.readouterr().err
