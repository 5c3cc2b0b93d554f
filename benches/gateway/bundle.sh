#!/usr/bin/env bash
# Builds what the gateway benchmark runs into one folder that can be carried to
# a machine with cores of its own and no network (README.md, "On a machine with
# cores of its own"): the release `lmstack` and mock, Debian's nginx, wrk and
# redis-server, and every shared library they load, with the loader.
#
#   benches/gateway/bundle.sh DIR
#
# DIR/bin holds one wrapper per program, which runs it with the bundled loader
# and libraries, so that nothing of the other machine's own libraries is used:
#
#   PATH="DIR/bin:$PATH" LMSTACK_BIN=DIR/bin/lmstack MOCK_BIN=DIR/bin/lmstack-gateway-mock \
#       PIN_WRK=0-5 PIN_MOCK=6-11 PIN_TARGET=12-15 TARGET_THREADS=4 benches/gateway/run.sh
set -euo pipefail

out="${1:?usage: bundle.sh DIR}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

missing=()
for program in wrk nginx redis-server; do
    command -v "$program" >/dev/null || [ -x "/usr/sbin/$program" ] || missing+=("$program")
done
if [ "${#missing[@]}" -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
(cd "$repo" && cargo build -q --release -p lmstack-gateway-mock -p lmstack-cli --features "lmstack-cli/${LMSTACK_FEATURES:-default}")

rm -rf "$out"
mkdir -p "$out/bin" "$out/real" "$out/lib"
programs=(
    "$CARGO_TARGET_DIR/release/lmstack"
    "$CARGO_TARGET_DIR/release/lmstack-gateway-mock"
    "$(command -v wrk)"
    "$(command -v nginx || echo /usr/sbin/nginx)"
    "$(command -v redis-server)"
    "$(command -v taskset)"
    "$(command -v pgrep)"
    "$(command -v curl)"
)
for program in "${programs[@]}"; do
    name="$(basename "$program")"
    cp "$program" "$out/real/$name"
    strip "$out/real/$name" 2>/dev/null || true
    ldd "$program" | awk '/=> \// { print $3 } /ld-linux/ && !/=>/ { print $1 }' |
        while read -r lib; do cp -n "$(readlink -f "$lib")" "$out/lib/$(basename "$lib")"; done
    cat >"$out/bin/$name" <<'EOF'
#!/bin/sh
here="$(dirname "$(readlink -f "$0")")/.."
exec "$here/lib/ld-linux-x86-64.so.2" --library-path "$here/lib" "$here/real/$(basename "$0")" "$@"
EOF
    chmod +x "$out/bin/$name"
done
du -sh "$out"
