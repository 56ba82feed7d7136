#!/usr/bin/env bash
# run.sh: Redis-side cost experiments behind docs/performance.md. Starts its
# own redis-server on a free loopback port and stops it at the end.
#   1. memory per waiting message for layout variants (INFO memory delta);
#   2. Redis CPU per message of sendbatch.lua (with lib.lua, as the producer
#      loads it) against floor.lua, for batches of 1, 16 and 256 messages;
#   3. Redis CPU per message of fetch.lua and ack.lua by call size
#      (batchcost/main.go).
# Usage: bench/luacost/run.sh [count]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")"
N=${1:-200000}
L=../../luascripts
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" --daemonize no >"$DIR/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
until cli ping >/dev/null 2>&1; do sleep 0.1; done

used() { cli info memory | tr -d '\r' | awk -F: '/^used_memory:/{u=$2} /^mem_clients_normal:/{c=$2} END{print u-c}'; }
layout() { # label idlen valuelen zset hash
  cli flushall >/dev/null
  cli eval "$(cat mem.lua)" 2 h z 0 1000 "$2" "$3" "$4" "$5" >/dev/null
  local a; a=$(used)
  for ((s = 1000; s < N + 1000; s += 50000)); do
    cli eval "$(cat mem.lua)" 2 h z "$s" $((N + 1000 - s < 50000 ? N + 1000 - s : 50000)) "$2" "$3" "$4" "$5" >/dev/null
  done
  echo "  $1: $(( ($(used) - a) / N )) B"
}
echo "memory per entry, $N entries:"
layout "HASH only: 12-char id, 166-byte value (38-byte header + 128-byte body)" 12 166 0 1
layout "ZSET only: 12-char id" 12 10 1 0
layout "both, 12-char id, 166-byte value (today's layout)" 12 166 1 1
layout "both, 16-char id, 166-byte value" 16 166 1 1
layout "both, 12-char id, 156-byte value (header <= 28 bytes)" 12 156 1 1
cli flushall >/dev/null; a=$(used)
for ((s = 0; s < N; s += 50000)); do cli eval "$(cat bucketed.lua)" 1 "{t:0}:z" "$s" 50000 >/dev/null; done
echo "  ZSET entries in ZSETs of 120 members ($(cli object encoding '{t:0}:z:1')): $(( ($(used) - a) / N )) B"

echo "Redis CPU per message, sending batches of k messages with EVALSHA (redis-benchmark, 4 clients, pipeline 4):"
cat $L/lib.lua <(echo) $L/sendbatch.lua >"$DIR/sendbatch-full.lua"
B=$(printf 'x%.0s' $(seq 1 100))
cpu() { cli info cpu | tr -d '\r' | awk -F: '/used_cpu_(sys|user):/{s+=$2} END{print s}'; }
for k in 1 16 256; do
  for f in "$DIR/sendbatch-full.lua" floor.lua; do
    sha=$(cli -x script load <"$f")
    args=()
    for i in $(seq 1 "$k"); do args+=("id$i:__rand_int__" 1700000000000 "$i$RANDOM" "$B-__rand_int__"); done
    n=$((200000 / k)); [ "$n" -lt 200 ] && n=200
    cli flushall >/dev/null
    c0=$(cpu)
    redis-benchmark -p "$PORT" -n "$n" -c 4 -P 4 -r 100000000 evalsha "$sha" 5 s p m w d PUBLISH 3 "$k" "${args[@]}" >/dev/null
    c1=$(cpu)
    awk -v k="$k" -v f="$(basename "$f")" -v c0="$c0" -v c1="$c1" -v n="$n" 'BEGIN{printf "  k=%-4d %-20s %6.2f us/msg\n", k, f, (c1-c0)*1e6/(n*k)}'
  done
done

echo
go run ./batchcost -redis "127.0.0.1:$PORT"
