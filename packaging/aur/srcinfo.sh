#!/usr/bin/env bash
# shellcheck disable=SC2154  # the variables come from the sourced PKGBUILD
# Prints .SRCINFO for the PKGBUILD beside it, field for field as `makepkg --printsrcinfo`
# writes the fields this PKGBUILD uses, for machines without makepkg (CI is Debian):
#   packaging/aur/srcinfo.sh | diff - packaging/aur/.SRCINFO
set -euo pipefail
# shellcheck source=/dev/null
source "$(dirname "$0")/PKGBUILD"
field() { local name=$1; shift; local v; for v in "$@"; do printf '\t%s = %s\n' "$name" "$v"; done; }
printf 'pkgbase = %s\n' "$pkgname"
field pkgdesc "$pkgdesc"
field pkgver "$pkgver"
field pkgrel "$pkgrel"
field url "$url"
field arch "${arch[@]}"
field license "${license[@]}"
field makedepends "${makedepends[@]}"
field depends "${depends[@]}"
field optdepends "${optdepends[@]}"
field source "${source[@]}"
field sha256sums "${sha256sums[@]}"
printf '\npkgname = %s\n' "$pkgname"
