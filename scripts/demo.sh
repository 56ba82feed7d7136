#!/usr/bin/env bash
# Runs the main demo of RMQ for Go (examples/demo): it builds the examples
# ordertimeout, pricemerge and priorityjobs and runs them against a throwaway
# redis-server, installing redis-server from the OS packages first if it is
# missing. Works from anywhere inside the repository; needs Go.
#
#   scripts/demo.sh
#   REDIS_URL=redis://127.0.0.1:6379/0 scripts/demo.sh   # use an existing Redis instead
#
# REDIS_URL is the one variable every program of the project reads for its
# Redis; the older REDIS_ADDR (HOST:PORT) still works.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ -z "${REDIS_URL:-}${REDIS_ADDR:-}" ]] && ! command -v redis-server >/dev/null 2>&1; then
	echo "demo.sh: redis-server not found; installing it with apt-get" >&2
	sudo=()
	if [[ "$(id -u)" -ne 0 ]]; then
		if command -v sudo >/dev/null 2>&1; then
			sudo=(sudo)
		else
			echo "demo.sh: not root and no sudo: install redis-server yourself (apt-get install -y redis-server)" >&2
			exit 1
		fi
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
fi

if ! command -v go >/dev/null 2>&1; then
	echo "demo.sh: go not found in PATH; install Go 1.26 or newer (go.mod says go 1.26.0)" >&2
	exit 1
fi

exec go run ./examples/demo "$@"
