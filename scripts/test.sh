#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it: installs the servers the tests
# start for themselves (redis-server, redis-cli, ZooKeeper, Chromium) when missing, then
# runs every package with the race detector. Tests never use a running
# server: each starts its own on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# The dashboard's browser test drives a headless Chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "installing ${need[*]} from the OS packages"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Every module of the repository (go.work lists them): the core, the
# service with its CLI and dashboard (cmd/), and the optional integrations.
modules=(. cmd x/prometheus x/otel)
for m in "${modules[@]}"; do
  (cd "$m" && go vet ./...)
done
(cd bench && go vet ./...)
for m in "${modules[@]}"; do
  (cd "$m" && go test -race -count=1 -timeout 18m "$@" ./...)
done
