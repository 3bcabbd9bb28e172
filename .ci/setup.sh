#!/usr/bin/env bash
# Set up a machine and the repo's virtualenv for running the tests.
#
# For a fresh Debian machine with Python 3.11, run as root (or with sudo), with no
# TTY and no prompts. Idempotent: a second run only checks that everything is there.
#   1. Debian packages: libosmesa6 (MuJoCo's off-screen OSMesa renderer, MUJOCO_GL=osmesa);
#      colcon, python3-colcon-ros and python3-setuptools (test/test_colcon.py builds the
#      package as ament_python with Debian's colcon, which runs setup.py on /usr/bin/python3).
#   2. .venv in the repo root (python3.11 -m venv), pip upgraded.
#   3. pip install -r requirements-ros.txt -r requirements-dev.txt -e .
# Environment: PYTHON overrides the interpreter used to create .venv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive
export PIP_NO_INPUT=1
export PIP_DISABLE_PIP_VERSION_CHECK=1

log() { printf '[setup] %s\n' "$*"; }
run() { log "\$ $*"; "$@"; }

as_root=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then as_root=(sudo -n); else log "not root and no sudo: apt-get may fail"; fi
fi

apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "Debian packages already installed: $*"
        return
    fi
    run "${as_root[@]}" apt-get update -q
    run "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# -- 1. system packages ---------------------------------------------------------------
APT_PACKAGES=(libosmesa6 colcon python3-colcon-ros python3-setuptools)
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
    PYTHON="$(command -v python3.11 || command -v python3 || true)"
fi
if [ -z "$PYTHON" ]; then
    APT_PACKAGES+=(python3 python3-venv)
elif ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Debian's python3 ships venv's pip bootstrap separately.
    APT_PACKAGES+=("python3-venv" "python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv")
fi
apt_install "${APT_PACKAGES[@]}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
log "python: $PYTHON ($("$PYTHON" --version 2>&1))"

# -- 2. virtualenv ----------------------------------------------------------------------
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    log ".venv exists ($(.venv/bin/python --version 2>&1))"
else
    rm -rf .venv
    run "$PYTHON" -m venv .venv
fi
run .venv/bin/python -m pip install -q --upgrade pip

# -- 3. Python packages -------------------------------------------------------------------
run .venv/bin/python -m pip install --progress-bar off -r requirements-ros.txt -r requirements-dev.txt -e .
run .venv/bin/python -c 'import rclpy, pinocchio, proxsuite, mujoco, whole_body_control; print("[setup] imports ok: rclpy, pinocchio", pinocchio.__version__, "mujoco", mujoco.__version__)'
log "done"
