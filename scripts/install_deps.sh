#!/usr/bin/env bash
# Installs the Debian packages turbospark needs, only those missing.
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# chromium + a font: tests/cli_analyze.sh renders the `analyze --html` pages
# headless and checks they are not blank (TS_NO_CHROMIUM=1 leaves them out;
# that test then skips the render, or fails under CI=true).
render_pkgs="chromium fonts-dejavu-core"
[ "${TS_NO_CHROMIUM:-}" = "1" ] && render_pkgs=""
# g++: nvcc's host compiler and the CUDA kernel emulation's (make cuda-emu, .ci/run)
for p in cmake make gcc g++ pkg-config libpcre2-dev libcjson-dev libmicrohttpd-dev clang libclang-rt-14-dev python3 python3-venv curl $render_pkgs ${TS_EXTRA_PKGS:-}; do
  have_pkg "$p" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
