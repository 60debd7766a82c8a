#!/usr/bin/env bash
# What the arm64 image test (tests/image/test_arm64_image.py, `make test-arm64`) needs beyond `make bootstrap`, on
# Debian, as root (or with sudo), idempotently: the qemu-user emulator registered for aarch64 ELF files in
# binfmt_misc with the F flag (Debian's qemu-user-static with binfmt-support registers it so), arch-test (mmdebstrap
# checks with it that the arm64 stand-in's packages can run) and Debian's aarch64 cross C compiler (the stand-in's
# decoy libraries). The test itself checks the registration again and fails, saying what to do, where it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/dev/progress.sh

CACHE_DIR="${SEMIF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/semif-sagemaker}"
LOG_DIR="$CACHE_DIR/logs"
STEPS=2
BINFMT=/proc/sys/fs/binfmt_misc
PACKAGES=(qemu-user-static binfmt-support arch-test gcc-aarch64-linux-gnu libc6-dev-arm64-cross)

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "install ok installed" || missing+=("$package")
done
step arm64-packages "the arm64 image test's Debian packages"
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "${#as_root[@]}" -gt 0 ]; then sudo -v; fi
  install_packages() {
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  }
  STEP_NOTE="${missing[*]}"
  run_logged install_packages
else
  up_to_date
fi

step arm64-binfmt "the aarch64 emulator in binfmt_misc"
if grep -q '^enabled' "$BINFMT/qemu-aarch64" 2> /dev/null && grep -q '^flags:.*F' "$BINFMT/qemu-aarch64"; then
  up_to_date
else
  register() {
    [ -e "$BINFMT/status" ] || "${as_root[@]}" mount -t binfmt_misc binfmt_misc "$BINFMT"
    "${as_root[@]}" update-binfmts --import qemu-aarch64 || true  # already imported: only the enabling is left
    "${as_root[@]}" update-binfmts --enable qemu-aarch64
    grep '^flags:' "$BINFMT/qemu-aarch64"
  }
  run_logged register
fi
