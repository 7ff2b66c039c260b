"""Files the certificate code writes: renamed into place, never through a planted symlink."""

from __future__ import annotations

import datetime
import itertools
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from certs.atomic import ATTEMPTS, write_atomically
from certs.build import issue_serving, new_ca, service_dns_names
from certs.files import write_certificates
from tests.certs.conftest import NAMESPACE, SERVICE


def names(*fixed: str) -> Callable[[], str]:
    """A token source that hands out ``fixed`` first, then fresh tokens."""
    counter = itertools.count()
    queue = list(fixed)
    return lambda: queue.pop(0) if queue else f"fresh{next(counter)}"


def test_the_file_lands_with_its_mode_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    target = tmp_path / "tls.key"
    write_atomically(target, b"secret", 0o600)
    assert target.read_bytes() == b"secret"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]


def test_a_symlink_planted_at_the_temporary_path_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    planted = tmp_path / ".tls.key.guessed.tmp"
    planted.symlink_to(victim)
    target = tmp_path / "tls.key"
    write_atomically(target, b"private key", 0o600, token=names("guessed"))
    assert victim.read_bytes() == b"untouched"
    assert target.read_bytes() == b"private key"
    assert not target.is_symlink()
    assert planted.is_symlink() and os.readlink(planted) == str(victim)  # left alone


def test_a_dangling_symlink_at_the_temporary_path_does_not_create_its_target(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / ".tls.key.guessed.tmp").symlink_to(elsewhere)
    write_atomically(tmp_path / "tls.key", b"k", 0o600, token=names("guessed"))
    assert not elsewhere.exists()


def test_a_symlink_planted_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    (tmp_path / "tls.key").symlink_to(victim)
    write_atomically(tmp_path / "tls.key", b"private key", 0o600)
    assert victim.read_bytes() == b"untouched"
    assert not (tmp_path / "tls.key").is_symlink()
    assert (tmp_path / "tls.key").read_bytes() == b"private key"


def test_when_every_name_is_taken_it_fails_and_writes_nothing(tmp_path: Path) -> None:
    for i in range(ATTEMPTS):
        (tmp_path / f".tls.key.t{i}.tmp").symlink_to(tmp_path / "victim")
    taken = [f"t{i}" for i in range(ATTEMPTS)]
    with pytest.raises(FileExistsError, match="names were taken"):
        write_atomically(tmp_path / "tls.key", b"k", 0o600, token=names(*taken))
    assert not (tmp_path / "tls.key").exists()
    assert not (tmp_path / "victim").exists()


def test_temporary_names_are_unpredictable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        seen.append(os.fspath(path))
        assert flags & os.O_EXCL and flags & os.O_NOFOLLOW and flags & os.O_CREAT
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", spy)  # the OS boundary, observed, not replaced
    write_atomically(tmp_path / "tls.key", b"a", 0o600)
    write_atomically(tmp_path / "tls.key", b"b", 0o600)
    assert len(seen) == 2 and seen[0] != seen[1]
    for path in seen:
        assert Path(path).parent == tmp_path
        assert len(Path(path).name) >= len(".tls.key.") + 32


def test_generate_never_writes_through_the_old_predictable_names(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (out / f".{name}.partial").symlink_to(victim)
    now = datetime.datetime.now(datetime.UTC)
    ca = new_ca(now)
    leaf = issue_serving(ca, service_dns_names(SERVICE, NAMESPACE), now)
    write_certificates(out, ca, leaf)
    assert victim.read_bytes() == b"untouched"
    assert (out / "tls.key").read_bytes() == leaf.key_pem
