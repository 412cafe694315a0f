#!/usr/bin/env bash
# Memory per idle QUIC connection at `hollywood relay` (issue 32 item 3,
# docs/ROBUSTNESS.md "QUIC at the relay"): the relay on loopback, one
# publisher that sends a message every 5 s, N players of its stream that
# stay connected; the relay's RSS before the players and once they are
# all in, per player.
#
#   bash scripts/relay-quic-idle.sh            # N=1000 players
#   N=300 HOLLYWOOD=target/release/hollywood bash scripts/relay-quic-idle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HOLLYWOOD:-target/release/hollywood}
N=${N:-1000}
PORT=${PORT:-9300}
GAP_MS=3
[ -x "$H" ] || { echo "no $H: cargo build --release -p hollywood-cli (or HOLLYWOOD=path)" >&2; exit 1; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
"$H" relay --listen 127.0.0.1:$PORT --open-publish --transport quic --workers 2 -s 1000 > /tmp/relay-quic-idle.log 2>&1 &
relay=$!; pids+=($relay)
sleep 1
"$H" tools relay-load --relay 127.0.0.1:$PORT --publish --interval 5s --duration 600s --transport quic > /dev/null 2>&1 &
pids+=($!)
sleep 2
rss() { awk '/VmRSS/{print $2}' /proc/$relay/status; }
before=$(rss)
"$H" tools relay-load --relay 127.0.0.1:$PORT --players "$N" --duration 600s --connect-gap ${GAP_MS}ms --transport quic > /tmp/relay-quic-idle-players.log 2>&1 &
pids+=($!)
sleep $(( N * GAP_MS / 1000 + 10 ))
after=$(rss)
players=$(grep -a -o '[0-9]* players' /tmp/relay-quic-idle.log | tail -1 | cut -d' ' -f1)
echo "players connected: ${players:-?} of $N"
echo "relay RSS: $before KiB before, $after KiB after"
awk -v a="$after" -v b="$before" -v n="${players:-$N}" 'BEGIN { printf "per idle QUIC player: %.1f KiB\n", (a - b) / n }'
