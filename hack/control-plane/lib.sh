# Sourced by build.sh and build-peer.sh: the folders, and `build`, which builds binaries of one Go module folder
# into .tools/bin and skips them when that folder's go.mod/go.sum (and link flags) are those of the last build.
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$ROOT/.tools/bin"
STAMPS="$ROOT/.tools/stamps"
mkdir -p "$BIN" "$STAMPS"
command -v go >/dev/null || { echo "$(basename "$0"): go is not installed (needs Go >= 1.26)" >&2; exit 1; }

# build MODULE_DIR OUTPUT PACKAGE [OUTPUT PACKAGE ...]
#   (link flags: $LDFLAGS_<module_dir>, build tags: $TAGS_<module_dir>, when set; OUTPUT may name a sub-folder)
build() {
  local dir="$HERE/$1"; shift
  local stamp="$STAMPS/$(basename "$dir")"
  local flags_var; flags_var="LDFLAGS_$(basename "$dir" | tr - _)"
  local ldflags="-s -w ${!flags_var:-}"
  local tags_var; tags_var="TAGS_$(basename "$dir" | tr - _)"
  local tags="${!tags_var:-}"
  local want; want="$( (cat "$dir"/*.go "$dir/go.mod" "$dir/go.sum" 2>/dev/null; echo "$ldflags $tags") | sha256sum | cut -c1-16)"
  local missing=0 out pkg
  for ((i = 1; i <= $#; i += 2)); do [[ -x "$BIN/${!i}" ]] || missing=1; done
  if [[ $missing == 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "up to date: $(basename "$dir")"; return
  fi
  while (($#)); do
    out="$1"; pkg="$2"; shift 2
    echo "building $out ($pkg)"
    mkdir -p "$(dirname "$BIN/$out")"
    (cd "$dir" && CGO_ENABLED=0 go build -mod=mod -trimpath -tags="$tags" -ldflags="$ldflags" -o "$BIN/$out.tmp" "$pkg")
    mv "$BIN/$out.tmp" "$BIN/$out"
  done
  echo "$want" >"$stamp"
}
