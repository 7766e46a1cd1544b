# OCI image helpers for scripts/build-images: buildah with a private store under the
# cache, the project's build inputs, OCI archives and their sizes. Source after common.sh.

# Not $KV_CACHE/images: that is the local image store (shared/images.py, scripts/build-guest).
OCI_DIR="$KV_CACHE/oci"
KV_BUILDAH_DRIVER="${KV_BUILDAH_DRIVER:-overlay}"  # vfs works too, slower and larger

bah() {
  # buildah on a private store; runs as root, chroot isolation (no nested runtime needed).
  buildah --root "$OCI_DIR/buildah/root" --runroot "$OCI_DIR/buildah/runroot" \
    --storage-driver "$KV_BUILDAH_DRIVER" "$@"
}

project_inputs() {
  # deps: the [project] dependencies, one a line; dirs: the package directories the wheel
  # is built from; digest: a hash of pyproject.toml and every file in those directories.
  # OCI_PYTHON: kv_python's answer, looked up once by the caller (pyenv shims are slow).
  "${OCI_PYTHON:-$(kv_python)}" - "$KV_REPO" "$1" <<'PY'
import fnmatch, hashlib, pathlib, sys, tomllib
repo, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
if mode == "deps":
    print("\n".join(pyproject["project"]["dependencies"]))
    sys.exit()
patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
dirs = sorted(
    d.name for d in repo.iterdir()
    if (d / "__init__.py").is_file() and any(fnmatch.fnmatch(d.name, p) for p in patterns)
)
if mode == "dirs":
    print(" ".join(dirs))
    sys.exit()
digest = hashlib.sha256((repo / "pyproject.toml").read_bytes())
for name in dirs:
    for path in sorted((repo / name).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
print(digest.hexdigest()[:16])
PY
}

export_archive() {
  # export_archive <ref> <path>: an oci-archive tar whose index names <ref> (what
  # `ctr images import` calls the image; gzip layers), and <path>.info with its sizes.
  local ref=$1 out=$2
  rm -f "$out.tmp"
  bah push --quiet --format oci "$ref" "oci-archive:$out.tmp:$ref"
  archive_sizes "$out.tmp" "$OCI_DIR/buildah/root/$KV_BUILDAH_DRIVER-layers/layers.json" \
    >"$out.info"
  mv -f "$out.tmp" "$out"
}

archive_sizes() {
  # archive_sizes <archive> <buildah layers.json>: "<bytes unpacked> <bytes in the archive>
  # <layer count> <top layer bytes unpacked>" of the first image in an OCI archive.
  python3 - "$1" "$2" <<'PY'
import json, sys, tarfile
# Layers without a digest are working containers' (a failed RUN can leave one behind).
layers = [layer for layer in json.load(open(sys.argv[2])) if "diff-digest" in layer]
unpacked = {layer["diff-digest"]: layer["diff-size"] for layer in layers}
with tarfile.open(sys.argv[1]) as tar:
    def blob(digest: str) -> dict:
        return json.load(tar.extractfile("blobs/sha256/" + digest.split(":")[1]))
    manifest = blob(json.load(tar.extractfile("index.json"))["manifests"][0]["digest"])
    sizes = [unpacked[d] for d in blob(manifest["config"]["digest"])["rootfs"]["diff_ids"]]
    packed = sum(layer["size"] for layer in manifest["layers"])
    print(sum(sizes), packed, len(sizes), sizes[-1])
PY
}

print_size() {
  # print_size <ref> <archive>: one human line on stderr.
  local unpacked packed count top
  read -r unpacked packed count top <"$2.info" || return 0
  printf '  %-48s %6s MB unpacked (%s MB gzip), %d layers, top %s MB\n' "$1" \
    "$(to_mb "$unpacked")" "$(to_mb "$packed")" "$count" "$(to_mb "$top")" >&2
}

to_mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1000000 }'; }

prune_lru() {
  # prune_lru <dir> <glob> <keep>: keeps the <keep> most recently used (touched) entries.
  local old
  # shellcheck disable=SC2012  # names are ours: <name>-<hex key>
  old=$(cd "$1" && ls -dt -- $2 2>/dev/null | tail -n +$(($3 + 1)))
  if [ -n "$old" ]; then (cd "$1" && echo "$old" | xargs rm -rf --); fi
}

prune_archives() {
  # Keeps the current archive of an image and its two most recently used predecessors
  # (other checkouts share the cache and may still be using theirs).
  local name=${1##*/}
  name=${name%-*}
  prune_lru "${1%/*}" "$name-????????????????.tar" 3
  (cd "${1%/*}" && for f in "$name"-*.tar.info; do [ -e "${f%.info}" ] || rm -f "$f"; done)
}
