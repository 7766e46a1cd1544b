# Shared shell helpers for scripts/up and scripts/test. Source, don't run.
# Everything heavy (venv, Go-built control plane, test guest) lives in the cache
# directory outside the repo, keyed by what it was built from, so a clean clone
# reuses it and nothing binary is ever committed.
set -euo pipefail

KV_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KV_CACHE="${KUBEVIRT_PY_CACHE:-$HOME/.cache/kubevirt-py}"
export KV_REPO KV_CACHE
mkdir -p "$KV_CACHE"

kv_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

KV_APT_PACKAGES=(
  libvirt-daemon-system libvirt-clients libvirt-dev qemu-system-x86 qemu-utils
  qemu-guest-agent busybox-static tini pkg-config genisoimage cpio libxml2-utils
  python3-dev gcc iproute2 util-linux
)

kv_ensure_apt() {
  local missing=()
  for p in "${KV_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return 0; fi
  kv_log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

kv_python() {
  # The interpreter the venv is built from: Python >= 3.11.
  local py
  for py in python3.13 python3.12 python3.11 python3; do
    if command -v "$py" >/dev/null && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      command -v "$py"; return 0
    fi
  done
  echo "no Python >= 3.11 found" >&2; return 1
}

kv_ensure_venv() {
  # The venv holds the dependencies only; the repo itself is put on PYTHONPATH so
  # any clone can use the same cached venv.
  local key
  key=$(cat "$KV_REPO/pyproject.toml" "$KV_REPO/scripts/lib/common.sh" | sha256sum | cut -c1-12)
  KV_VENV="$KV_CACHE/venv-$key"
  export KV_VENV
  if [ ! -x "$KV_VENV/bin/python" ] || [ ! -f "$KV_VENV/.complete" ]; then
    kv_log "creating venv $KV_VENV"
    rm -rf "$KV_VENV"
    "$(kv_python)" -m venv "$KV_VENV"
    "$KV_VENV/bin/pip" install -q --upgrade pip
    "$KV_VENV/bin/python" - "$KV_REPO/pyproject.toml" > "$KV_CACHE/requirements-$key.txt" <<'PY'
import sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))["project"]
for dep in data["dependencies"] + data["optional-dependencies"]["dev"]:
    print(dep)
PY
    "$KV_VENV/bin/pip" install -q -r "$KV_CACHE/requirements-$key.txt"
    touch "$KV_VENV/.complete"
  fi
  export PATH="$KV_VENV/bin:$PATH"
  export PYTHONPATH="$KV_REPO${PYTHONPATH:+:$PYTHONPATH}"
}
