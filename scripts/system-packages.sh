#!/bin/sh
# The Debian/Ubuntu packages `make test` needs beyond Python: installed here when missing (as
# root, through apt-get), or the run stops at once with the exact command to type. Nothing is
# skipped later because a tool is absent.
#
#   scripts/system-packages.sh PYTHON [registry] [promtool] [zstd]
#
# - python3.X-venv (always): `python3 -m venv` needs ensurepip, which Debian ships separately;
# - docker-registry (with `registry`): the real OCI registry (distribution 2.8) the
#   pin-resolution tests push to;
# - prometheus (with `promtool`): Prometheus's own `promtool`, which checks the chart's alert
#   rules, runs their unit tests and parses every dashboard query. The package's service is
#   not started by the tests (and not by apt-get where no init system runs);
# - zstd (with `zstd`): unpacks the compressed control-plane binaries CI runs the real-server
#   lane with.
set -eu
python=${1:-python3}
shift || true
missing=""
if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    missing="$missing python$version-venv"
fi
# want TOOL PACKAGE: the Debian PACKAGE when TOOL is neither on PATH nor in /usr/bin.
want() {
    if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "/usr/bin/$1" ]; then
        missing="$missing $2"
    fi
}
for tool in "$@"; do
    case "$tool" in
        registry) want docker-registry docker-registry ;;
        promtool) want promtool prometheus ;;
        zstd) want zstd zstd ;;
        *) echo "system-packages.sh: unknown tool '$tool'" >&2; exit 2 ;;
    esac
done
[ -z "$missing" ] && exit 0

command="apt-get update && apt-get install -y --no-install-recommends$missing"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "wspin needs:$missing (Debian/Ubuntu package names); install them with your" \
        "package manager and run make again" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "wspin needs the packages:$missing" >&2
    echo "run:  sudo sh -c '$command'" >&2
    echo "then run make again" >&2
    exit 1
fi
echo "installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086  # word splitting of the package list is intended
apt-get install -y -qq --no-install-recommends $missing >/dev/null
