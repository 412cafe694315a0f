#!/usr/bin/env bash
# A few points of the fec-arq grid (scenarios/fec-arq.toml, docs/FEC.md
# "FEC vs ARQ vs both") on real packets, SRT side by side (issue 34 item
# 3): per point one `hollywood lab messages` with UDP, QUICsilver and TCP
# Hollywood, each without and with FEC, plus SRT plain (ARQ) and SRT's FEC
# filter at the same 25 % budget (cols:4,rows:1, no ARQ). Needs root (the
# namespace labs) and srt-live-transmit.
#
#   bash scripts/fec-grid-lab.sh                               # the default points
#   POINTS="300ms:2% 100ms:gilbert:0.0068,0.3333" SEED=2 bash scripts/fec-grid-lab.sh
#   MESSAGES=1000 HOLLYWOOD=/path/to/hollywood bash scripts/fec-grid-lab.sh
#
# A point is RTT:LOSS, LOSS as `--loss` takes it (2%, or gilbert:P,R: 2 %
# in mean bursts of 3 is gilbert:0.0068,0.3333). Writes OUT/<point>.json
# (the command's JSON) and prints one table: on time of the messages sent
# per arm, the load average before and after each point (real time on a
# loaded machine is not the protocols': docs/FEC.md "In the lab").
set -euo pipefail
cd "$(dirname "$0")/.."
H=${HOLLYWOOD:-target/release/hollywood}
POINTS=${POINTS:-"300ms:2% 300ms:gilbert:0.0068,0.3333 100ms:2%"}
SEED=${SEED:-1}
MESSAGES=${MESSAGES:-4000}
OUT=${OUT:-out/fec-grid-lab}
[ -x "$H" ] || { echo "no $H: cargo build --release -p hollywood-cli (or HOLLYWOOD=path)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
command -v srt-live-transmit > /dev/null || { echo "needs srt-live-transmit (apt-get install srt-tools)" >&2; exit 1; }
command -v jq > /dev/null || { echo "needs jq" >&2; exit 1; }
mkdir -p "$OUT"
load() { cut -d' ' -f1 /proc/loadavg; }
printf '%-34s %-38s %8s %8s %6s %6s %s\n' point arm on_time share late never "load"
for p in $POINTS; do
    rtt=${p%%:*}
    loss=${p#*:}
    file="$OUT/$(echo "$p" | tr ':,%' '__p').json"
    before=$(load)
    "$H" lab messages --name fecg --transport udp,quicsilver,hollywood --fec both \
        --srt none --srt fec,cols:4,rows:1,arq:never \
        --rtt "$rtt" --loss "$loss" --rate 8mbit --size 1316 --interval 5ms \
        --lifetime 200ms --messages "$MESSAGES" --cc bbr --seed "$SEED" --json > "$file"
    after=$(load)
    jq -r --arg p "$p" --arg l "$before→$after" '
        (.runs[] | [$p, (.transport + (if .fec then "+fec" else "" end)), .on_time, .sent, .late, .never_arrived])
        , (.srt[] | [$p, .transport, .on_time, .messages, .late, .never_arrived])
        | "\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])\t\(.[4])\t\(.[5])\t\($l)"' "$file" |
        while IFS=$'\t' read -r a b c d e f g; do
            share=$(awk -v n="$c" -v d="$d" 'BEGIN { printf "%.2f", 100 * n / d }')
            printf '%-34s %-38s %8s %7s%% %6s %6s %s\n' "$a" "$b" "$c" "$share" "$e" "$f" "$g"
        done
done
