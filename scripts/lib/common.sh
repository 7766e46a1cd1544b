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
  libvirt-daemon-system libvirt-clients libvirt-dev qemu-system-x86 qemu-utils qemu-block-extra ovmf
  qemu-guest-agent busybox-static tini pkg-config genisoimage cpio libxml2-utils
  # the test guest's sshd (scripts/build-guest), and ssh/scp for virtctl-py ssh/scp
  dropbear-bin openssh-sftp-server openssh-client
  python3-dev gcc libc6-dev iproute2 util-linux openssl procps xz-utils
  # pod network NAT and passt (scripts/bench-network; the images install their own)
  nftables passt
  # devices.tpm: libvirt starts swtpm (and swtpm_setup) for the launcher's TPM
  swtpm swtpm-tools
  # scripts/build-virtiofsd: the Rust virtiofsd links libseccomp and libcap-ng
  libseccomp-dev libcap-ng-dev
  # scripts/build-images: images without docker, and containerd + runc to run them
  buildah umoci skopeo mmdebstrap containerd runc
  # real nodes: pod networking (CNI plugins), kube-proxy's iptables mode
  containernetworking-plugins iptables conntrack
  # promtool for the rule unit tests; prometheus for the local cluster's (localkube/prometheus.py)
  prometheus
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
    if command -v "$py" >/dev/null 2>&1 \
        && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
      command -v "$py"; return 0
    fi
  done
  echo "no Python >= 3.11 found" >&2; return 1
}

kv_venv_key() {
  # Only the dependency lists decide the venv, so editing other parts of pyproject is free.
  "$(kv_python)" - "$KV_REPO/pyproject.toml" <<'PY'
import hashlib, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
deps = project["dependencies"] + project["optional-dependencies"]["dev"]
print(hashlib.sha256("\n".join(deps).encode()).hexdigest()[:12])
PY
}

kv_ensure_venv() {
  # The venv holds the dependencies only; the repo itself is put on PYTHONPATH so
  # any clone can use the same cached venv. A lock keeps concurrent callers apart.
  KV_VENV="$KV_CACHE/venv-$(kv_venv_key)"
  export KV_VENV
  if [ ! -f "$KV_VENV/.complete" ]; then
    (
      flock 9
      if [ ! -f "$KV_VENV/.complete" ]; then
        kv_log "creating venv $KV_VENV"
        rm -rf "$KV_VENV"
        "$(kv_python)" -m venv "$KV_VENV"
        "$KV_VENV/bin/pip" install -q --upgrade pip
        "$KV_VENV/bin/python" - "$KV_REPO/pyproject.toml" > "$KV_VENV/requirements.txt" <<'PY'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["dev"]))
PY
        "$KV_VENV/bin/pip" install -q -r "$KV_VENV/requirements.txt"
        touch "$KV_VENV/.complete"
      fi
    ) 9>"$KV_CACHE/venv.lock"
  fi
  export PATH="$KV_VENV/bin:$PATH"
  export PYTHONPATH="$KV_REPO${PYTHONPATH:+:$PYTHONPATH}"
}
