#!/usr/bin/env bash
# The on-time comparison of docs/LAB.md and docs/TAPS.md ("SRT at its
# operating point"): `hollywood lab compare` on three paths, each repeated
# over several emulator seeds, every transport in the same run, SRT's
# latency derived from the deadline (deadline - RTT/2 - 15 ms).
#
#   sudo bash scripts/compare-campaign.sh [OUT_DIR] [SEEDS]
#   sudo CAMPAIGN=ts bash scripts/compare-campaign.sh [OUT_DIR] [SEEDS]
#
# OUT_DIR (default target/compare-campaign) gets one JSON file per path and
# seed, and summary.md: per path and transport, on time as mean and range
# over the seeds, the median of the per-run p50 / p99 delays, and (with
# CAMPAIGN=ts) the frames ffprobe decoded. SEEDS defaults to "1 2 3".
# CAMPAIGN=paths (default): srt, Linux BBR and CUBIC, our engine with BBR,
# `transmit` over quinn and UDP on three paths. CAMPAIGN=ts: ffmpeg's
# MPEG-TS through SRT and `hollywood transmit`, with UDP open and blocked,
# at the defaults (docs/TAPS.md). Needs root, srt-live-transmit
# (srt-tools), ffmpeg for ts, and a release build (built here if missing).
# Takes about 2.5 minutes per run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/compare-campaign}
seeds=${2:-1 2 3}
campaign=${CAMPAIGN:-paths}
bin=${HOLLYWOOD:-target/release/hollywood}
[ "$(id -u)" = 0 ] || { echo "compare-campaign: needs root (network namespaces)" >&2; exit 1; }
command -v srt-live-transmit >/dev/null || { echo "compare-campaign: needs srt-live-transmit (apt-get install srt-tools)" >&2; exit 1; }
[ -x "$bin" ] || cargo build --release -p hollywood-cli
mkdir -p "$out"

# name | options
case $campaign in
  paths)
    transports=srt,linux-bbr,linux-cubic,engine-bbr,transmit-quic,udp
    paths=(
      "defaults|"
      "rtt60-loss3-d200|--rtt 60ms --loss 3% --deadline 200ms"
      "rtt100-loss8-d300|--rtt 100ms --loss 8% --deadline 300ms"
    )
    ;;
  ts)
    command -v ffmpeg >/dev/null || { echo "compare-campaign: needs ffmpeg" >&2; exit 1; }
    transports=srt,transmit,srt+udp-blocked,transmit+udp-blocked
    paths=("ts-defaults|--ts testsrc --ts-out $out/ts")
    ;;
  *) echo "compare-campaign: CAMPAIGN is paths or ts, not '$campaign'" >&2; exit 1 ;;
esac
for p in "${paths[@]}"; do
  name=${p%%|*}
  opts=${p#*|}
  for s in $seeds; do
    f="$out/$name-seed$s.json"
    if [ -s "$f" ]; then echo "== $name seed $s: kept $f (delete it to re-run)" >&2; continue; fi
    echo "== $name seed $s: hollywood lab compare $opts --seed $s --transports $transports" >&2
    # shellcheck disable=SC2086
    "$bin" lab compare $opts --seed "$s" --transports "$transports" --json >"$f.tmp"
    mv "$f.tmp" "$f"
  done
done

names=()
for p in "${paths[@]}"; do names+=("${p%%|*}"); done
python3 - "$out" "${names[@]}" >"$out/summary-$campaign.md" <<'EOF'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
runs = {}
for path in sys.argv[2:]:
    for f in sorted(out.glob(f"{path}-seed*.json")):
        runs.setdefault(path, []).append(json.loads(f.read_text()))
for path, docs in runs.items():
    p = docs[0]["params"]
    print(f"### {path}: rtt {p['rtt']}, loss {p['loss']}, deadline {p['deadline']}, "
          f"{p['messages']} chunks of {p['size']} B every {p['interval']}; "
          f"seeds {', '.join(d['params']['seed'] for d in docs)}\n")
    print("| transport | on time, mean (min–max) | p50 ms (median of runs) | p99 ms (median of runs) | frames decoded | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    names = [r["transport"] for r in docs[0]["results"]]
    for n in names:
        rows = [r for d in docs for r in d["results"] if r["transport"] == n]
        fr = [100.0 * r["on_time_fraction"] for r in rows]
        # A run that delivered nothing has no delays.
        got = [r for r in rows if r["on_time"] + r["late"] > 0 and r["delay_p50_ms"] is not None]
        p50 = [r["delay_p50_ms"] for r in got]
        p99 = [r["delay_p99_ms"] for r in got]
        errs = sum(1 for r in rows if r["error"])
        label = n
        lat = {r.get("srt_latency_ms") for r in rows} - {None}
        if lat:
            label += f" (latency {'/'.join(str(l) for l in sorted(lat))} ms)"
        med = lambda xs: f"{statistics.median(xs):.1f}" if xs else "–"
        frames = [r["ts_frames_decoded"] for r in rows if r.get("ts_frames_decoded") is not None]
        fr_s = "/".join(str(x) for x in frames) if frames else "–"
        print(f"| {label} | {statistics.mean(fr):.2f} % ({min(fr):.2f}–{max(fr):.2f}) | "
              f"{med(p50)} | {med(p99)} | {fr_s} | {errs} |")
    print()
EOF
cat "$out/summary-$campaign.md"
