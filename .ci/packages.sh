#!/usr/bin/env bash
# Builds the .deb and .rpm from a binary that is already built (CI passes the debug binary
# the test run made; the release workflow passes target/release/k3d-gpu), then checks them:
# lintian with no errors, rpm -qpi/-qpl with the files we promise, and the .deb installed
# with dpkg, run (--version, completions, man, validate of an installed example), removed.
#
#   .ci/packages.sh [BINARY]          # default target/debug/k3d-gpu; packages in target/pkg/
#   K3D_GPU_PKG_INSTALL=0 .ci/packages.sh   # build and check, but no dpkg -i on this machine
#
# Tools: cargo-deb and cargo-generate-rpm are installed once (pinned, --locked) and reused;
# lintian, rpm, man-db, ruby, nix-bin (nix-instantiate --parse), shellcheck come from apt
# when missing; check-jsonschema from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-target/debug/k3d-gpu}
pkg=target/pkg
CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
CHECK_JSONSCHEMA_VERSION=0.39.0

say() { printf '== %s\n' "$*" >&2; }
fail() { printf 'packages: %s\n' "$*" >&2; exit 1; }
# Root in the CI container; a GitHub runner's user has passwordless sudo.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

[ -x "$bin" ] || fail "$bin is not an executable (build it first: cargo build)"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)

# --- tools: install once, skip when the pinned version is already there -----------------
cargo_tool() { # crate version command
    if ! "$3" --version 2>/dev/null | grep -qF "$2"; then
        say "installing $1 $2"
        cargo install --locked --quiet "$1" --version "$2"
    fi
}
cargo_tool cargo-deb "$CARGO_DEB_VERSION" cargo-deb
cargo_tool cargo-generate-rpm "$CARGO_GENERATE_RPM_VERSION" cargo-generate-rpm
missing=()
for tool in lintian:lintian rpm:rpm man:man-db ruby:ruby nix-instantiate:nix-bin shellcheck:shellcheck; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} from apt"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! check-jsonschema --version 2>/dev/null | grep -qF "$CHECK_JSONSCHEMA_VERSION"; then
    say "installing check-jsonschema $CHECK_JSONSCHEMA_VERSION"
    python3 -m pip install --quiet "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"
fi

# --- the workflows against GitHub's schema ------------------------------------------------
say "workflow schema"
check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml examples/ci/*.yml

# --- packaging/: what can be checked without Arch, Homebrew or a Nix daemon ---------------
say "packaging/ syntax"
shellcheck .ci/packages.sh packaging/aur/srcinfo.sh
# makepkg runs the PKGBUILD's functions under errexit, so a bare `cd` is its convention.
shellcheck -s bash -e SC2034,SC2154,SC2164 packaging/aur/PKGBUILD
packaging/aur/srcinfo.sh | diff -u packaging/aur/.SRCINFO - || fail ".SRCINFO is stale: makepkg --printsrcinfo > .SRCINFO"
ruby -c packaging/homebrew/k3d-gpu.rb >/dev/null
nix-instantiate --parse packaging/nix/flake.nix >/dev/null 2>&1 || nix-instantiate --parse packaging/nix/flake.nix
# Versions in step with Cargo.toml: tests/install.rs (every_packaging_file_names_the_cargo_version).

# --- assets, made by the binary itself so they match the CLI that ships ------------------
say "assets from $bin"
rm -rf "$pkg"
mkdir -p "$pkg/completions" "$pkg/man"
strip -o "$pkg/k3d-gpu" "$bin"
"$pkg/k3d-gpu" completions bash >"$pkg/completions/k3d-gpu.bash"
"$pkg/k3d-gpu" completions zsh >"$pkg/completions/_k3d-gpu"
"$pkg/k3d-gpu" completions fish >"$pkg/completions/k3d-gpu.fish"
"$pkg/k3d-gpu" man --out "$pkg/man"
gzip -9n "$pkg"/man/*.1
# The fixture hosts as one archive: their sysfs links stay links (docs/fixture-hosts.md), and
# the same tree gives the same bytes (no owners, no times, sorted).
tar -C tests/fixtures --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - hosts |
    gzip -9n >"$pkg/fixture-hosts.tar.gz"

# --- build ---------------------------------------------------------------------------------
say "cargo deb / cargo generate-rpm"
# --no-build: package the binary above, never rebuild; it is stripped already.
cargo deb --no-build --no-strip --quiet --output "$pkg/"
# The build date from the last commit, so the same tree gives the same .rpm.
cargo generate-rpm --output "$pkg/" --source-date "$(git log -1 --format=%ct 2>/dev/null || echo 0)"
deb=$(ls "$pkg"/k3d-gpu_"$version"-1_*.deb)
rpm=$(ls "$pkg"/k3d-gpu-"$version"-1.*.rpm)

# --- check the .deb ------------------------------------------------------------------------
say "lintian $deb"
# Errors fail; warnings are printed for the reviewer. --tag-display-limit 0: show them all.
lintian --fail-on error --tag-display-limit 0 "$deb"

expect_files() { # listing file...
    local listing=$1; shift
    for f in "$@"; do
        grep -qxF "$f" <<<"$listing" || fail "package lacks $f"
    done
}
promised=(/usr/bin/k3d-gpu
    /usr/share/bash-completion/completions/k3d-gpu
    /usr/share/fish/vendor_completions.d/k3d-gpu.fish
    /usr/share/man/man1/k3d-gpu.1.gz
    /usr/share/man/man1/k3d-gpu-validate.1.gz
    /usr/share/doc/k3d-gpu/README.md
    /usr/share/doc/k3d-gpu/examples/nvidia-workstation.toml
    /usr/share/doc/k3d-gpu/examples/homelab-fleet.toml
    /usr/share/doc/k3d-gpu/examples/homelab-fleet/arc-01.json
    /usr/share/doc/k3d-gpu/k3dgpu.schema.json
    /usr/share/doc/k3d-gpu/fixture-hosts.tar.gz)
expect_files "$(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||')" \
    "${promised[@]}" /usr/share/zsh/vendor-completions/_k3d-gpu /usr/share/doc/k3d-gpu/copyright

# --- check the .rpm ------------------------------------------------------------------------
say "rpm -qpi / -qpl $rpm"
rpm -qpi "$rpm"
[ "$(rpm -qp --qf '%{VERSION}' "$rpm")" = "$version" ] || fail "rpm version is not $version"
expect_files "$(rpm -qpl "$rpm")" "${promised[@]}" /usr/share/zsh/site-functions/_k3d-gpu

# --- install the .deb, use it, remove it ---------------------------------------------------
if [ "${K3D_GPU_PKG_INSTALL:-1}" = 0 ]; then
    say "skipping dpkg -i (K3D_GPU_PKG_INSTALL=0)"
    exit 0
fi
dpkg -s k3d-gpu >/dev/null 2>&1 && fail "k3d-gpu is already installed here; not touching it"
say "dpkg -i $deb"
as_root dpkg -i "$deb" >/dev/null
trap 'as_root dpkg -r k3d-gpu >/dev/null' EXIT
installed=/usr/bin/k3d-gpu
[ "$("$installed" --version)" = "k3d-gpu $version" ] || fail "installed --version is not $version"
for f in /usr/share/bash-completion/completions/k3d-gpu /usr/share/zsh/vendor-completions/_k3d-gpu \
    /usr/share/fish/vendor_completions.d/k3d-gpu.fish; do
    [ -s "$f" ] || fail "$f not installed"
done
# The installed bash completion completes: `k3d-gpu ima<TAB>` offers `images`.
# shellcheck disable=SC2016  # expanded by the inner bash
completed=$(bash -c 'source /usr/share/bash-completion/completions/k3d-gpu
    COMP_WORDS=(k3d-gpu ima); COMP_CWORD=1; _k3d__gpu k3d-gpu ima k3d-gpu; echo "${COMPREPLY[*]}"')
[ "$completed" = images ] || fail "bash completion of 'k3d-gpu ima' gave '$completed'"
man -w k3d-gpu | grep -qF /usr/share/man/man1/k3d-gpu.1.gz || fail "man k3d-gpu does not find the page"
MANPAGER=cat MANWIDTH=80 man k3d-gpu 2>/dev/null | grep -q 'k3d-gpu-validate(1)' || fail "man k3d-gpu does not render"
# Everything from the installed files: an example against a shipped fixture host, the fleet
# example with its facts, and the schema every example's first line points at.
hosts=$(mktemp -d)
tar -C "$hosts" -xzf /usr/share/doc/k3d-gpu/fixture-hosts.tar.gz
"$installed" validate -c /usr/share/doc/k3d-gpu/examples/nvidia-workstation.toml \
    --root "$hosts/hosts/desktop-rpl-nvidia" >/dev/null || fail "validate of an installed example failed"
rm -rf "$hosts"
"$installed" validate -c /usr/share/doc/k3d-gpu/examples/homelab-fleet.toml >/dev/null ||
    fail "validate of the installed fleet example failed"
schema=$(sed -n '1s/^#:schema //p' /usr/share/doc/k3d-gpu/examples/nvidia-workstation.toml)
[ -s "/usr/share/doc/k3d-gpu/examples/$schema" ] || fail "the examples' #:schema $schema is not installed"
as_root dpkg -r k3d-gpu >/dev/null
trap - EXIT
[ ! -e "$installed" ] || fail "dpkg -r left $installed"
say "packages ok: $deb $rpm"
