#!/usr/bin/env bash
# The image's HEALTHCHECK: exit 0 when GET PATH (default /health) on this container's Pagoda
# answers 200; 1 while the model loads (503), when nothing listens, or on a timeout.
# Plain bash (/dev/tcp), so the images need no curl. The port is $PAGODA_PORT, as for the server.
set -uo pipefail
path="${1:-/health}"
port="${PAGODA_PORT:-8000}"
exec 3<>"/dev/tcp/127.0.0.1/${port}" 2>/dev/null || exit 1
printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
IFS=' ' read -r -t 5 version status _ <&3 || exit 1
[[ "$version" == HTTP/1.* && "$status" == 200 ]]
