#!/bin/sh
# bir installer: downloads a release archive, verifies its sha256 against the
# published SHA256SUMS, and installs `bir` plus the `bir-proxy` and
# `bir-hooks` links. POSIX sh (no bashisms); every failure says what failed.
#
#   curl -fsSL "$BIR_INSTALL_BASE_URL/install.sh" | sh
#   sh install.sh [--prefix DIR] [--version X.Y.Z] [--from ARCHIVE] [--uninstall]
#
# Release layout under the base URL (what `make dist` produces in dist/):
#   <base>/latest/SHA256SUMS, <base>/latest/bir-<version>-<target>.tar.gz
#   <base>/v<version>/SHA256SUMS, <base>/v<version>/bir-<version>-<target>.tar.gz
#
# Environment:
#   BIR_INSTALL_BASE_URL  where releases live (default below)
#   BIR_INSTALL_TARGET    override the detected target (e.g. x86_64-unknown-linux-gnu)

set -eu

DEFAULT_BASE_URL="https://github.com/baseinstrunner/bir/releases/download"

prefix="${HOME:-}/.local"
version=""
from=""
uninstall=0
tmp=""

say() { printf '%s\n' "bir-install: $*"; }
die() {
    printf '%s\n' "bir-install: error: $*" >&2
    exit 1
}
cleanup() {
    if [ -n "$tmp" ] && [ -d "$tmp" ]; then
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

usage() {
    cat <<'USAGE'
Usage: install.sh [--prefix DIR] [--version X.Y.Z] [--from ARCHIVE] [--uninstall]

Installs bir into DIR/bin (default ~/.local/bin) with the bir-proxy and
bir-hooks links next to it.

  --prefix DIR     install into DIR/bin (default: ~/.local)
  --version X.Y.Z  install this release (default: the latest)
  --from ARCHIVE   install from a local bir-<version>-<target>.tar.gz, offline;
                   verified against SHA256SUMS next to it when present
  --uninstall      remove bir, bir-proxy and bir-hooks from DIR/bin
  --help           this text

Environment: BIR_INSTALL_BASE_URL (release location), BIR_INSTALL_TARGET.
USAGE
}

while [ $# -gt 0 ]; do
    case "$1" in
        --prefix)
            [ $# -ge 2 ] || die "--prefix needs a directory"
            prefix="$2"
            shift 2
            ;;
        --prefix=*)
            prefix="${1#--prefix=}"
            shift
            ;;
        --version)
            [ $# -ge 2 ] || die "--version needs a version, e.g. --version 0.1.0"
            version="$2"
            shift 2
            ;;
        --version=*)
            version="${1#--version=}"
            shift
            ;;
        --from)
            [ $# -ge 2 ] || die "--from needs the path of a release archive"
            from="$2"
            shift 2
            ;;
        --from=*)
            from="${1#--from=}"
            shift
            ;;
        --uninstall)
            uninstall=1
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            die "unknown option '$1' (see --help)"
            ;;
    esac
done

[ -n "$prefix" ] || die "no install prefix: HOME is not set; pass --prefix DIR"
version="${version#v}"
bindir="${prefix%/}/bin"

# --- uninstall -------------------------------------------------------------

if [ "$uninstall" -eq 1 ]; then
    removed=0
    for name in bir-proxy bir-hooks bir; do
        f="$bindir/$name"
        if [ -L "$f" ] || [ -f "$f" ]; then
            rm -f "$f" || die "cannot remove $f"
            say "removed $f"
            removed=1
        fi
    done
    if [ "$removed" -eq 0 ]; then
        say "nothing to remove: no bir in $bindir"
    fi
    say "your recordings and settings in ${BIR_HOME:-~/.baseinstrunner} are kept (delete that directory to remove them)"
    say "if you wrapped MCP servers with 'bir install', run 'bir uninstall --all' before removing bir"
    exit 0
fi

# --- tools -----------------------------------------------------------------

need() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' is required but was not found on PATH"
}
need tar
need gzip
need mkdir
need mv

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | awk '{print $1}'
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | awk '{print $1}'
    elif command -v openssl >/dev/null 2>&1; then
        openssl dgst -sha256 "$1" | awk '{print $NF}'
    else
        die "no sha256 tool found (need sha256sum, shasum or openssl) to verify the download"
    fi
}

# The expected sha256 of file name $2 in a SHA256SUMS file $1 (empty if absent).
expected_sum() {
    awk -v n="$2" '{ f = $2; sub(/^\*/, "", f); if (f == n) { print tolower($1); exit } }' "$1"
}

download() {
    # download URL DEST
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --retry 2 -o "$2" "$1" || die "download failed: $1"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$2" "$1" || die "download failed: $1"
    else
        die "neither curl nor wget is available to download $1 (or use --from ARCHIVE)"
    fi
}

detect_target() {
    if [ -n "${BIR_INSTALL_TARGET:-}" ]; then
        printf '%s\n' "$BIR_INSTALL_TARGET"
        return
    fi
    os=$(uname -s 2>/dev/null || echo unknown)
    arch=$(uname -m 2>/dev/null || echo unknown)
    case "$arch" in
        x86_64 | amd64) arch=x86_64 ;;
        aarch64 | arm64) arch=aarch64 ;;
        *) die "unsupported CPU architecture '$arch' (set BIR_INSTALL_TARGET to override)" ;;
    esac
    case "$os" in
        Linux) printf '%s\n' "$arch-unknown-linux-gnu" ;;
        Darwin) printf '%s\n' "$arch-apple-darwin" ;;
        *) die "unsupported operating system '$os' (set BIR_INSTALL_TARGET to override)" ;;
    esac
}

tmp=$(mktemp -d 2>/dev/null || true)
if [ -z "$tmp" ]; then
    tmp="${TMPDIR:-/tmp}/bir-install.$$"
    mkdir -m 700 "$tmp" || die "cannot create a temporary directory in ${TMPDIR:-/tmp}"
fi

# --- get the archive -------------------------------------------------------

if [ -n "$from" ]; then
    [ -f "$from" ] || die "no such archive: $from"
    case "$from" in
        /*) archive="$from" ;;
        *) archive="$(pwd)/$from" ;;
    esac
    name=$(basename "$from")
    sums="$(dirname "$from")/SHA256SUMS"
    if [ -f "$sums" ]; then
        want=$(expected_sum "$sums" "$name")
        [ -n "$want" ] || die "$sums has no entry for $name; refusing to install an unlisted archive"
    else
        want=""
        say "note: no SHA256SUMS next to $from; the archive is not verified"
    fi
else
    target=$(detect_target)
    base="${BIR_INSTALL_BASE_URL:-$DEFAULT_BASE_URL}"
    base="${base%/}"
    if [ -n "$version" ]; then
        dir="$base/v$version"
    else
        dir="$base/latest"
    fi
    say "fetching $dir/SHA256SUMS"
    download "$dir/SHA256SUMS" "$tmp/SHA256SUMS"
    if [ -n "$version" ]; then
        name="bir-$version-$target.tar.gz"
    else
        name=$(awk -v t="-$target.tar.gz" '{ f = $2; sub(/^\*/, "", f); if (substr(f, 1, 4) == "bir-" && length(f) > length(t) && substr(f, length(f) - length(t) + 1) == t) { print f; exit } }' "$tmp/SHA256SUMS")
        [ -n "$name" ] || die "the latest release has no archive for $target (see $dir/SHA256SUMS)"
    fi
    want=$(expected_sum "$tmp/SHA256SUMS" "$name")
    [ -n "$want" ] || die "$dir/SHA256SUMS has no entry for $name (no release for $target?)"
    say "fetching $dir/$name"
    download "$dir/$name" "$tmp/$name"
    archive="$tmp/$name"
fi

# --- verify ----------------------------------------------------------------

if [ -n "$want" ]; then
    got=$(sha256_of "$archive")
    if [ "$got" != "$want" ]; then
        die "checksum mismatch for $name: expected $want, got $got; nothing was installed"
    fi
    say "sha256 verified: $got"
fi

mkdir "$tmp/x" || die "cannot create $tmp/x"
(cd "$tmp/x" && gzip -dc "$archive" | tar -xf -) || die "cannot unpack $archive (not a .tar.gz?)"
bin=""
for cand in "$tmp/x/bir" "$tmp"/x/*/bir; do
    if [ -f "$cand" ]; then
        bin="$cand"
        break
    fi
done
[ -n "$bin" ] || die "$name does not contain a 'bir' executable"
chmod 755 "$bin" || die "cannot make $bin executable"
newver=$("$bin" --version 2>/dev/null) || die "the bir in $name does not run on this machine ($(uname -s 2>/dev/null) $(uname -m 2>/dev/null)); nothing was installed"

# --- install: temp file in the target directory, then rename ---------------

mkdir -p "$bindir" || die "cannot create $bindir (try --prefix DIR)"
[ -w "$bindir" ] || die "$bindir is not writable (try --prefix DIR, or run as the directory's owner)"
staged="$bindir/.bir.install.$$"
cp "$bin" "$staged" || {
    rm -f "$staged"
    die "cannot write into $bindir"
}
chmod 755 "$staged" || {
    rm -f "$staged"
    die "cannot set the mode of $staged"
}
mv -f "$staged" "$bindir/bir" || {
    rm -f "$staged"
    die "cannot move the new bir into $bindir/bir"
}
for link in bir-proxy bir-hooks; do
    staged="$bindir/.$link.install.$$"
    rm -f "$staged"
    ln -s bir "$staged" || die "cannot create the $link link in $bindir"
    if [ -d "$bindir/$link" ] && [ ! -L "$bindir/$link" ]; then
        rm -f "$staged"
        die "$bindir/$link is a directory; remove it and run the installer again"
    fi
    mv -f "$staged" "$bindir/$link" || {
        rm -f "$staged"
        die "cannot create $bindir/$link"
    }
done

say "installed $newver into $bindir (bir, bir-proxy, bir-hooks)"
case ":${PATH:-}:" in
    *":$bindir:"*) ;;
    *)
        say "$bindir is not on your PATH; add it, e.g.:"
        say "  echo 'export PATH=\"$bindir:\$PATH\"' >> ~/.profile"
        ;;
esac
say "next: 'bir install' wraps the MCP servers of your clients; 'bir doctor' checks them"
