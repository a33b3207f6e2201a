#!/bin/sh
# fi_pingpong (libfabric's own tool, with its data check -c) between two
# processes over softefa. Usage: pingpong_test.sh FI_PINGPONG FABRIC [ARGS...]
# The environment names softefa's directory on LD_LIBRARY_PATH.
set -u
pingpong=$1
fabric=$2
shift 2
. "$(dirname "$0")/../../../../scripts/lib/quiet-port.sh"
port=$(weft_quiet_port $$)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$pingpong" -p efa -e rdm -f "$fabric" -B "$port" -c "$@" >"$out/server" 2>&1 &
server=$!
sleep 1
"$pingpong" -p efa -e rdm -f "$fabric" -P "$port" -c "$@" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
echo "--- server (rc $server_rc)"
cat "$out/server"
echo "--- client (rc $client_rc)"
cat "$out/client"
[ "$client_rc" -eq 0 ] && [ "$server_rc" -eq 0 ]
