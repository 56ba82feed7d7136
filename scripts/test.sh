#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
# installs the programs the tests start for themselves when they are missing
# (redis-server, redis-cli, ZooKeeper, Chromium, nats-server, RabbitMQ; curl
# and jq for the README's shell examples), then runs go vet and go test
# -race in every module.
# Tests never use a server that is already running: each starts its own on
# free loopback ports.
#
#   scripts/test.sh                     # everything
#   scripts/test.sh -run TestReadme     # extra arguments go to every go test
#
# It prints an estimate first and ends with exactly one summary line:
#   test.sh: PASS: 34 packages ok (9 without tests), 7 modules, 11m19s
#   test.sh: FAIL: 2 of 43 packages failed (...), 7 modules, 13m56s
set -uo pipefail
cd "$(dirname "$0")/.."

# The modules whose tests run, in this order. A new module is added here
# and to go.work; the check below refuses a go.work module that is in
# neither list.
modules=(. cmd x/prometheus x/otel x/forward/nats x/forward/amqp x/forward/kafka)
# Modules that are only vetted: the benchmark driver has no tests.
vet_only=(bench)

# Every module of go.work must be in one of the lists.
for m in $(awk '/^use *\(/{u=1; next} u && /\)/{u=0} u{print $1} /^use [^(]/{print $2}' go.work); do
  m=${m#./}
  [ -z "$m" ] && m=.
  case " ${modules[*]} ${vet_only[*]} " in
    *" $m "*) ;;
    *) echo "test.sh: FAIL: module $m is in go.work but not in scripts/test.sh's lists"; exit 1 ;;
  esac
done

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# The dashboard's browser tests drive a headless Chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The README's rmqd examples are run as written: curl and jq.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
# The forwarders' tests start a nats-server with JetStream and a RabbitMQ
# node (Kafka's run against franz-go's in-process kfake).
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test.sh: installing ${need[*]} from the OS packages"
  $sudo apt-get update -qq || { echo "test.sh: FAIL: apt-get update"; exit 1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null ||
    { echo "test.sh: FAIL: could not install ${need[*]}"; exit 1; }
fi

# The estimate: the last full run on this machine when there was one, else
# the figure the README gives (this project's 2 shared cores: 11-16 min,
# up to 30 min when other work kept them busy).
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rmq-go"
last=""
[ -r "$cache/test-duration" ] && last=$(cat "$cache/test-duration")
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
if [ -n "$last" ]; then
  est="the last full run here took $last"
else
  est="about 12-16 min on 2 cores (the README's figure; more under load)"
fi
echo "test.sh: ${#modules[@]} modules (${modules[*]}), go vet then go test -race; $est;" \
  "$(nproc 2>/dev/null || echo ?) cores, load average $load (more load, longer)"

start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
vet_failed=()
for m in "${modules[@]}" "${vet_only[@]}"; do
  (cd "$m" && go vet ./...) || vet_failed+=("$m")
done
test_failed=()
# The root module first, alone: its packages keep both cores busy. Then cmd
# in the foreground and, beside it, the forwarder and metrics modules, whose
# tests mostly wait for their brokers to start (their output is printed when
# they end): a run takes minutes less than one module after another.
side=()
for m in "${modules[@]}"; do
  case "$m" in x/*) side+=("$m") ;; esac
done
run_module() {
  (cd "$1" && go test -race -count=1 -timeout 18m "${@:2}" ./...)
}
for m in "${modules[@]}"; do
  case "$m" in x/*) continue ;; esac
  if [ "$m" = cmd ] && [ ${#side[@]} -gt 0 ]; then
    sidelog=$(mktemp -d)
    (
      for x in "${side[@]}"; do
        if run_module "$x" "$@" >"$sidelog/$(echo "$x" | tr / _).log" 2>&1; then :; else echo "$x" >>"$sidelog/failed"; fi
      done
    ) &
    sidepid=$!
  fi
  run_module "$m" "$@" 2>&1 | tee -a "$log" || test_failed+=("$m")
done
if [ -n "${sidepid:-}" ]; then
  wait "$sidepid"
  for x in "${side[@]}"; do
    cat "$sidelog/$(echo "$x" | tr / _).log" | tee -a "$log"
  done
  if [ -f "$sidelog/failed" ]; then
    while read -r x; do test_failed+=("$x"); done <"$sidelog/failed"
  fi
  rm -rf "$sidelog"
fi

secs=$(( $(date +%s) - start ))
took=$(printf '%dm%02ds' $((secs / 60)) $((secs % 60)))
# go test prints one line per package: "ok  <pkg> <time>", "FAIL <pkg>
# <time|[build failed]>" or "?   <pkg> [no test files]".
read -r ok failed none names < <(awk '
  $1 == "ok" { ok++ }
  $1 == "FAIL" && NF >= 2 { failed++; names = names (names == "" ? "" : " ") $2 }
  $1 == "?" { none++ }
  END { printf "%d %d %d %s\n", ok, failed, none, (names == "" ? "-" : names) }' "$log")
total=$((ok + failed + none))
# A run of everything (no arguments) that ran packages sets the next
# estimate, failed or not: a failing test takes about as long.
if [ "$#" -eq 0 ] && [ "$total" -gt 0 ]; then
  mkdir -p "$cache" && echo "$took" >"$cache/test-duration"
fi
if [ "$failed" -eq 0 ] && [ ${#vet_failed[@]} -eq 0 ] && [ ${#test_failed[@]} -eq 0 ] && [ "$total" -gt 0 ]; then
  echo "test.sh: PASS: $ok packages ok ($none without tests), ${#modules[@]} modules, $took"
  exit 0
fi
why="$failed of $total packages failed"
[ "$failed" -gt 0 ] && why="$why ($names)"
[ "$failed" -eq 0 ] && [ ${#test_failed[@]} -gt 0 ] && why="go test failed in module ${test_failed[*]}"
[ ${#vet_failed[@]} -gt 0 ] && why="$why; go vet failed in ${vet_failed[*]}"
[ "$total" -eq 0 ] && why="no package ran"
echo "test.sh: FAIL: $why, ${#modules[@]} modules, $took"
exit 1
