#!/usr/bin/env bash
# Issue 15's gateway benchmark: `lmstack serve` beside LiteLLM's proxy, Portkey's
# gateway and nginx, all in front of the same mock upstream, under the same load.
# See benches/gateway/README.md for what is measured and how to read the table.
#
#   benches/gateway/run.sh                  # everything, 10 s per cell
#   DURATION=15 TARGETS="mock lmstack" benches/gateway/run.sh
#
# Needs: cargo, python3 (venv), node/npm, curl, and wrk and nginx (installed with
# apt-get when missing, which needs root). Everything else goes under BENCH_DIR.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"

# --- settings -----------------------------------------------------------------
BENCH_DIR="${BENCH_DIR:-$repo/target/gateway-bench}"
DURATION="${DURATION:-10}"          # seconds per cell
WARMUP="${WARMUP:-2}"               # seconds of load before each mode's cells, not counted
CONCURRENCY="${CONCURRENCY:-16 256}"
TARGETS="${TARGETS:-mock nginx lmstack lmstack-full lmstack-anthropic lmstack-natural portkey litellm}"
TTFB_SAMPLES="${TTFB_SAMPLES:-200}" # sequential streaming requests, during the streaming load
LITELLM_VERSION="1.108.5"
PORTKEY_VERSION="1.15.2"
HONO_NODE_SERVER_VERSION="1.12.2"
CPUS="$(nproc)"
# On a machine with cores to spare, each program may get its own (taskset
# lists, e.g. PIN_WRK=0-5 PIN_MOCK=6-11 PIN_TARGET=12-15); TARGET_THREADS is then
# the targets' workers (nginx's worker_processes, lmstack's runtime threads).
PIN_WRK="${PIN_WRK:-}" PIN_MOCK="${PIN_MOCK:-}" PIN_TARGET="${PIN_TARGET:-}"
TARGET_THREADS="${TARGET_THREADS:-$CPUS}"
# Built elsewhere (a bundle carried to a machine without network): skip the
# install and the build, and run these.
LMSTACK_BIN="${LMSTACK_BIN:-}" MOCK_BIN="${MOCK_BIN:-}"
CLK_TCK="$(getconf CLK_TCK)"

mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

MOCK_PORT=9100 NGINX_PORT=9101 LMSTACK_PORT=9102 PORTKEY_PORT=9103 LITELLM_PORT=9104 REDIS_PORT=9105
MOCK="http://127.0.0.1:$MOCK_PORT"

# Runs a command on the cores of a PIN_* list, if one is set.
pinned() { # $1: the list (may be empty), then the command
    local cores="$1"
    shift
    if [ -n "$cores" ]; then taskset -c "$cores" "$@"; else "$@"; fi
}

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- cleanup: stop whatever this script started -------------------------------
pids=()
stop_all() {
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM $(tree "$pid") 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    pids=()
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# The process and its descendants (LiteLLM's and nginx's workers).
tree() {
    local pid="$1" child
    echo "$pid"
    for child in $(pgrep -P "$pid" || true); do tree "$child"; done
}

# Peak resident memory of a process tree, in MiB: the sum of each process's VmHWM
# (shared pages of forked workers are counted in each, so a tree's sum is an upper
# bound).
peak_rss_mib() {
    local total=0 pid kb
    for pid in $(tree "$1"); do
        kb="$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)"
        total=$((total + ${kb:-0}))
    done
    awk -v kb="$total" 'BEGIN { printf "%.0f", kb / 1024 }'
}

# CPU time (user + system) of a process tree so far, in clock ticks.
cpu_ticks() {
    local total=0 pid ticks
    for pid in $(tree "$1"); do
        # The fields after the command name, which may hold spaces: utime and
        # stime are the 14th and 15th of the line, the 12th and 13th after it.
        ticks="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0)"
        total=$((total + ${ticks:-0}))
    done
    echo "$total"
}

wait_port() {
    local port="$1" what="$2" i
    for i in $(seq 1 600); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    log "$what did not listen on $port within 60 s; its log:"
    tail -n 30 "$BENCH_DIR/logs/$what.log" >&2 || true
    return 1
}

# --- install and build ----------------------------------------------------------
install() {
    if [ -n "$LMSTACK_BIN" ]; then
        log "using $LMSTACK_BIN and $MOCK_BIN as built"
        return
    fi
    local missing=()
    command -v wrk >/dev/null || missing+=(wrk)
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    if [[ " $TARGETS " == *" lmstack-redis "* ]]; then command -v redis-server >/dev/null || missing+=(redis-server); fi
    if [ "${#missing[@]}" -gt 0 ]; then
        log "apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
    fi
    if [[ " $TARGETS " == *" litellm "* ]] &&
        [ "$("$BENCH_DIR/litellm/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null)" != "$LITELLM_VERSION" ]; then
        log "installing litellm[proxy]==$LITELLM_VERSION"
        python3 -m venv "$BENCH_DIR/litellm"
        "$BENCH_DIR/litellm/bin/pip" install -q "litellm[proxy]==$LITELLM_VERSION"
    fi
    if [[ " $TARGETS " == *" portkey "* ]] &&
        [ "$(node -p "require('$BENCH_DIR/portkey/node_modules/@portkey-ai/gateway/package.json').version + ' ' + require('$BENCH_DIR/portkey/node_modules/@hono/node-server/package.json').version" 2>/dev/null)" != "$PORTKEY_VERSION $HONO_NODE_SERVER_VERSION" ]; then
        log "installing @portkey-ai/gateway@$PORTKEY_VERSION (with @hono/node-server@$HONO_NODE_SERVER_VERSION)"
        mkdir -p "$BENCH_DIR/portkey"
        # The package asks for @hono/node-server ^1.3.3; npm then picks 1.19.x, with
        # which every streaming chat completion fails ("TypeError: immutable" in
        # updateHeaders, Portkey-AI/gateway issues 1389 and 1550; 1.14.2 fails too).
        # 1.12.2 works.
        cat >"$BENCH_DIR/portkey/package.json" <<EOF
{
  "private": true,
  "dependencies": { "@portkey-ai/gateway": "$PORTKEY_VERSION" },
  "overrides": { "@hono/node-server": "$HONO_NODE_SERVER_VERSION" }
}
EOF
        (cd "$BENCH_DIR/portkey" && rm -rf node_modules package-lock.json && npm install -s --no-audit --no-fund)
    fi
    log "building the mock and lmstack (release)"
    cargo build -q --release -p lmstack-gateway-mock
    cargo build -q --release -p lmstack-cli
    LMSTACK_BIN="$CARGO_TARGET_DIR/release/lmstack"
    MOCK_BIN="$CARGO_TARGET_DIR/release/lmstack-gateway-mock"
}

# --- the targets --------------------------------------------------------------
# Each start_* runs one target in the background, records its pid in $target_pid
# and sets $url (the chat completions URL) and $headers (extra request headers).
start_mock() {
    TOKIO_WORKER_THREADS="$CPUS" pinned "$PIN_MOCK" "$MOCK_BIN" \
        "127.0.0.1:$MOCK_PORT" >"$BENCH_DIR/logs/mock-upstream.log" 2>&1 &
    mock_pid=$!
    pids+=("$mock_pid")
    wait_port "$MOCK_PORT" mock-upstream
}

# Redis for the limits' counters (lmstack-redis), started once, on the mock's
# cores; no persistence.
start_redis() {
    [ -n "${redis_pid:-}" ] && return
    pinned "$PIN_MOCK" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
        >"$BENCH_DIR/logs/redis.log" 2>&1 &
    redis_pid=$!
    pids+=("$redis_pid")
    wait_port "$REDIS_PORT" redis
}

start_target() {
    local name="$1" conf="$BENCH_DIR/conf"
    headers=()
    request=chat
    case "$name" in
    mock)
        target_pid="$mock_pid"
        url="$MOCK/v1/chat/completions"
        return
        ;;
    nginx)
        # A plain reverse proxy as one would deploy it for SSE: a worker per core,
        # keep-alive to the upstream, no buffering (each chunk goes on at once), no
        # access log.
        cat >"$conf/nginx.conf" <<EOF
worker_processes $TARGET_THREADS;
pid $BENCH_DIR/run/nginx.pid;
error_log $BENCH_DIR/logs/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $BENCH_DIR/run/nginx-body;
    proxy_temp_path $BENCH_DIR/run/nginx-proxy;
    upstream mock { server 127.0.0.1:$MOCK_PORT; keepalive 256; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
EOF
        pinned "$PIN_TARGET" "$(command -v nginx || echo /usr/sbin/nginx)" -c "$conf/nginx.conf" -g 'daemon off;' \
            >"$BENCH_DIR/logs/nginx.log" 2>&1 &
        url="http://127.0.0.1:$NGINX_PORT/v1/chat/completions"
        ;;
    lmstack | lmstack-full | lmstack-natural | lmstack-nodelay | lmstack-anthropic | lmstack-deploy | \
        lmstack-limits | lmstack-redis | lmstack-otel)
        local natural="" preload="" server="" extra="" env=()
        case "$name" in
        # An Anthropic client through the gateway to the OpenAI mock: every
        # chunk lifted, and written again in the other wire.
        lmstack-anthropic) request=messages ;;
        # The same wire, without the fast path: each chunk lifted and encoded
        # again (the layers below all take this path too).
        lmstack-full) extra="fast_path = false" ;;
        # The cost of each of the team gateway's layers (issue 29), one at a
        # time: two deployments of the model (both on the mock); a client key
        # with limits whose counters are in memory, or in Redis; spans
        # exported over OTLP (to the mock, which takes them as a collector).
        lmstack-deploy)
            extra="$(printf 'fast_path = false\n[[models.bench.deployments]]\nweight = 1\n[[models.bench.deployments]]\nweight = 2')"
            ;;
        lmstack-limits | lmstack-redis)
            server="$(printf '[[server.keys]]\nname = "bench"\nkey_env = "LMSTACK_BENCH_KEY"\nrequests_per_minute = 1000000000\ntokens_per_minute = 1000000000000\nbudget = 1000000000.0')"
            extra="$(printf 'fast_path = false\n[models.bench.price]\ninput = 3.0\noutput = 15.0')"
            env=(LMSTACK_BENCH_KEY=sk-bench-gateway)
            headers=("Authorization: Bearer sk-bench-gateway")
            if [ "$name" = lmstack-redis ]; then
                start_redis
                server="$(printf '[server.limits]\nredis_url = "redis://127.0.0.1:%s/"\n%s' "$REDIS_PORT" "$server")"
            fi
            ;;
        lmstack-otel)
            # A batch every 100 ms, so that export runs all along the cells.
            env=(OTEL_EXPORTER_OTLP_ENDPOINT="$MOCK" OTEL_BSP_SCHEDULE_DELAY=100)
            extra="fast_path = false"
            ;;
        esac
        [ "$name" = lmstack-natural ] && natural='natural_tools = "tagged"'
        if [ "$name" = lmstack-nodelay ]; then
            # A diagnostic, not in the default targets: lmstack with TCP_NODELAY set
            # on its accepted sockets by an LD_PRELOAD shim (diag/nodelay.c).
            cc -O2 -shared -fPIC -o "$BENCH_DIR/run/nodelay.so" "$repo/benches/gateway/diag/nodelay.c" -ldl
            preload="$BENCH_DIR/run/nodelay.so"
        fi
        cat >"$conf/$name.toml" <<EOF
$server
[models.bench]
provider = "openai"
base_url = "$MOCK/v1"
model = "mock"
retry = false
max_concurrent = 1024
$natural
$extra
EOF
        # No line per request (`RUST_LOG=warn`), as nginx runs with `access_log off`.
        RUST_LOG=warn LD_PRELOAD="$preload" TOKIO_WORKER_THREADS="$TARGET_THREADS" pinned "$PIN_TARGET" \
            env "${env[@]}" "$LMSTACK_BIN" serve --config "$conf/$name.toml" \
            --listen "127.0.0.1:$LMSTACK_PORT" >"$BENCH_DIR/logs/$name.log" 2>&1 &
        url="http://127.0.0.1:$LMSTACK_PORT/v1/chat/completions"
        [ "$request" = messages ] && url="http://127.0.0.1:$LMSTACK_PORT/v1/messages"
        ;;
    portkey)
        # Portkey's server is one Node process; production mode, headless (no
        # console UI). The upstream is chosen per request by headers.
        NODE_ENV=production node "$BENCH_DIR/portkey/node_modules/@portkey-ai/gateway/build/start-server.js" \
            --port="$PORTKEY_PORT" --headless >"$BENCH_DIR/logs/portkey.log" 2>&1 &
        url="http://127.0.0.1:$PORTKEY_PORT/v1/chat/completions"
        headers=("x-portkey-provider: openai" "x-portkey-custom-host: $MOCK/v1" "Authorization: Bearer sk-bench")
        ;;
    litellm)
        # LiteLLM's production advice: a worker per core, no verbose logging, a
        # master key (it refuses to start without one), no database.
        cat >"$conf/litellm.yaml" <<EOF
model_list:
  - model_name: bench
    litellm_params:
      model: openai/mock
      api_base: $MOCK/v1
      api_key: sk-bench
litellm_settings:
  set_verbose: false
  json_logs: true
  request_timeout: 600
EOF
        LITELLM_MASTER_KEY=sk-bench-gateway LITELLM_LOG=ERROR "$BENCH_DIR/litellm/bin/litellm" --config "$conf/litellm.yaml" \
            --host 127.0.0.1 --port "$LITELLM_PORT" --num_workers "$CPUS" \
            >"$BENCH_DIR/logs/litellm.log" 2>&1 &
        url="http://127.0.0.1:$LITELLM_PORT/v1/chat/completions"
        headers=("Authorization: Bearer sk-bench-gateway")
        ;;
    *)
        log "unknown target $name"
        return 1
        ;;
    esac
    target_pid=$!
    pids+=("$target_pid")
    local port="${url#http://127.0.0.1:}"
    wait_port "${port%%/*}" "$name"
}

stop_target() { # the target and any workers it forked
    local name="$1" pid="$2" rest=() p all alive
    [ "$name" = mock ] && return
    all="$(tree "$pid")"
    kill -TERM $all 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do # 10 s, then SIGKILL
        alive=0
        for p in $all; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 1 ] || break
        sleep 0.1
    done
    kill -KILL $all 2>/dev/null || true
    for p in "${pids[@]}"; do [ "$p" = "$pid" ] || rest+=("$p"); done
    pids=("${rest[@]}")
}

# --- the load -----------------------------------------------------------------
body() { # $1: true or false (the same body is an OpenAI Chat and an Anthropic request)
    printf '{"model":"bench","messages":[{"role":"user","content":"Say something about gateways."}],"max_tokens":64,"stream":%s}' "$1"
}

# A wrk script: the POST, the headers, and a JSON line of figures at the end.
wrk_script() { # $1: stream
    local out="$BENCH_DIR/conf/wrk-$1.lua" h
    {
        echo 'wrk.method = "POST"'
        printf "wrk.body = '%s'\n" "$(body "$1")"
        echo 'wrk.headers["Content-Type"] = "application/json"'
        for h in "${headers[@]}"; do
            printf 'wrk.headers["%s"] = "%s"\n' "${h%%: *}" "${h#*: }"
        done
        cat <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d,"non2xx":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, e.status))
end
EOF
    } >"$out"
    echo "$out"
}

# Time to first byte of a streaming response (curl's time_starttransfer: the status
# line), from one curl making up to TTFB_SAMPLES requests in turn on one connection
# while the load runs: it starts a second in and is stopped a second before the load
# ends, so that only samples taken under load count (a slow target gives fewer).
ttfb_sample() { # writes the median, the p99 (µs) and the number of samples to $1
    local args=() h url_list=() window=$((DURATION > 3 ? DURATION - 2 : 1))
    for h in "${headers[@]}"; do args+=(-H "$h"); done
    for _ in $(seq 1 "$TTFB_SAMPLES"); do url_list+=(-o /dev/null "$url"); done
    # The figures go to stderr, unbuffered, so that none is lost when curl is stopped.
    { timeout "$window" curl -s -w '%{stderr}%{time_starttransfer}\n' -H 'Content-Type: application/json' \
        "${args[@]}" -d "$(body true)" "${url_list[@]}" 2>&1 >/dev/null || true; } |
        sort -g | awk '{ v[NR] = $1 } END {
            if (NR == 0) { print "- - 0"; exit }
            printf "%d %d %d\n", v[int((NR + 1) / 2)] * 1e6, v[int(NR * 0.99 + 0.999)] * 1e6, NR }' >"$1"
}

check_target() { # one request of each kind must succeed, with the mock's text
    local stream args=() h answer
    for h in "${headers[@]}"; do args+=(-H "$h"); done
    for stream in false true; do
        answer="$(curl -sf -H 'Content-Type: application/json' "${args[@]}" -d "$(body "$stream")" "$url" || true)"
        if [[ "$answer" != *lazy* ]]; then
            log "$1 did not answer a request (stream: $stream) with the mock's completion:"
            curl -s -H 'Content-Type: application/json' "${args[@]}" -d "$(body "$stream")" "$url" | head -c 600 >&2
            echo >&2
            return 1
        fi
    done
}

# --- main ---------------------------------------------------------------------
install
mkdir -p "$BENCH_DIR/logs" "$BENCH_DIR/conf" "$BENCH_DIR/run" "$BENCH_DIR/results"
results="$BENCH_DIR/results/$(date -u +%Y%m%dT%H%M%SZ).tsv"
printf 'target\tmode\tconcurrency\trps\tp50_us\tp99_us\tttfb_p50_us\tttfb_p99_us\terrors\tnon2xx\tpeak_rss_mib\tttfb_samples\tcpu_us_per_request\n' >"$results"
wrk_threads="$CPUS"
if [ -n "$PIN_WRK" ]; then wrk_threads="$(taskset -c "$PIN_WRK" nproc)"; fi

start_mock
for target in $TARGETS; do
    log "== $target"
    start_target "$target"
    check_target "$target"
    for stream in false true; do
        script="$(wrk_script "$stream")"
        pinned "$PIN_WRK" wrk -t "$wrk_threads" -c 16 -d "${WARMUP}s" -s "$script" "$url" >/dev/null
        for c in $CONCURRENCY; do
            ttfb="$BENCH_DIR/run/ttfb"
            echo "- - 0" >"$ttfb"
            if [ "$stream" = true ]; then
                (sleep 1 && ttfb_sample "$ttfb") &
                sampler=$!
            fi
            before="$(cpu_ticks "$target_pid")"
            line="$(pinned "$PIN_WRK" wrk -t "$((c < wrk_threads ? c : wrk_threads))" -c "$c" -d "${DURATION}s" --timeout 10s -s "$script" "$url" | grep '^RESULT ' | cut -d' ' -f2-)"
            if [ "$stream" = true ]; then wait "$sampler" || true; fi
            after="$(cpu_ticks "$target_pid")"
            read -r ttfb50 ttfb99 ttfb_n <"$ttfb"
            # wrk's JSON line, flat and of numbers only, read without a parser.
            read -r requests duration p50 p99 errors non2xx < <(echo "$line" | tr -d '{}"' | tr ',' '\n' |
                awk -F: '{ v[$1] = $2 } END { print v["requests"], v["duration_us"], v["p50_us"], v["p99_us"], v["errors"], v["non2xx"] }')
            rps=$(awk -v n="$requests" -v us="$duration" 'BEGIN { printf "%.0f", n / us * 1e6 }')
            # The target's CPU time per request served in the cell (the TTFB
            # sampler's requests among them).
            cpu_us=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n=$((requests + ttfb_n)) \
                'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')
            mode=$([ "$stream" = true ] && echo stream || echo json)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$mode" "$c" "$rps" "$p50" "$p99" \
                "$ttfb50" "$ttfb99" "$errors" "$non2xx" "$(peak_rss_mib "$target_pid")" "$ttfb_n" "$cpu_us" >>"$results"
            log "$target $mode c=$c: $rps req/s, p50 ${p50} µs, p99 ${p99} µs, CPU ${cpu_us} µs/request, errors $errors, non-2xx $non2xx, TTFB samples $ttfb_n"
        done
    done
    stop_target "$target" "$target_pid"
done
stop_all

log "raw figures: $results"
if command -v python3 >/dev/null; then python3 "$repo/benches/gateway/table.py" "$results"; fi
