#!/usr/bin/env bash
# The gateway benchmark on a machine with cores of its own (16 or more), from a
# bundle made by bundle.sh: wrk on cores 0-5, the mock (and Redis) on 6-11, the
# target on 12-15 with 4 workers (nginx's processes, lmstack's runtime threads),
# ROUNDS times; each round's TSV goes to OUT, and the table of medians is printed
# where python3 is found.
#
#   benches/gateway/on-cores.sh BUNDLE OUT
set -euo pipefail

bundle="$(cd "${1:?usage: on-cores.sh BUNDLE OUT}" && pwd)"
out="${2:?usage: on-cores.sh BUNDLE OUT}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out" /var/lib/nginx /var/log/nginx 2>/dev/null || true

export PATH="$bundle/bin:$PATH"
export LMSTACK_BIN="$bundle/bin/lmstack" MOCK_BIN="$bundle/bin/lmstack-gateway-mock"
export PIN_WRK="${PIN_WRK:-0-5}" PIN_MOCK="${PIN_MOCK:-6-11}" PIN_TARGET="${PIN_TARGET:-12-15}"
export TARGET_THREADS="${TARGET_THREADS:-4}"
export TARGETS="${TARGETS:-mock nginx lmstack lmstack-anthropic}"
export BENCH_DIR="$out/bench"

for round in $(seq 1 "${ROUNDS:-2}"); do
    echo "== round $round"
    "$here/run.sh" >"$out/round-$round.txt" 2>&1 || { tail -n 40 "$out/round-$round.txt"; exit 1; }
done
cp "$BENCH_DIR"/results/*.tsv "$out/"
if command -v python3 >/dev/null; then python3 "$here/table.py" "$out"/*.tsv; fi
