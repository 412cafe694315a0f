#!/usr/bin/env bash
# Behaviour-preserving changes, checked: run the same experiment commands
# with two `hollywood` binaries (e.g. release builds before and after a
# restructure) and compare every JSON, CSV, Markdown, SVG and PNG they write.
#
#   bash scripts/same-outputs.sh OLD_BIN NEW_BIN [OUT_DIR]
#
# Wall-clock fields (how long a run took) differ between any two runs and are
# masked before comparing. So are the short names of the source documents
# (docs/REFERENCES.md): the old binary's "seed 001" is the new "[DASHing-2018]".
# Exits non-zero and lists the files that differ otherwise. Takes about ten
# minutes per binary on 2 cores (`repro all` is most of it).
set -euo pipefail
old=$(realpath "$1"); new=$2; [ "$new" = "--old-only" ] || new=$(realpath "$new")
out=${3:-target/same-outputs}
# REUSE_OLD=1 keeps a finished OUT_DIR/old from an earlier call;
# COMPARE_ONLY=1 keeps both and only compares.
if [ -n "${COMPARE_ONLY:-}" ] && [ -f "$out/old/.done" ] && [ -f "$out/new/.done" ]; then
  :
elif [ -n "${REUSE_OLD:-}" ] && [ -f "$out/old/.done" ]; then
  rm -rf "$out/new"
else
  rm -rf "$out"
fi
mkdir -p "$out"

run_all() { # BIN DIR
  local bin=$1 dir=$2
  mkdir -p "$dir"
  (
    cd "$dir"
    "$bin" demo --json --out demo > demo.json
    "$bin" voip --transport hollywood --json --csv voip.csv > voip.json
    "$bin" voip --transport tcp --json > voip-tcp.json
    "$bin" sim messages --transport all --json > messages.json
    "$bin" video --transport tcp,hollywood,quicsilver,quic-ss,udp --duration 20s --json --csv video.csv > video.json
    "$bin" dash --transport tcp,hollywood,quic-gop --duration 120s --seeds 2 --json --csv dash.csv > dash.json
    "$bin" dash --transport tcp,hollywood --duration 60s --chunk 2s --buffer 8s --abr throughput \
      --rx-threshold 0.8 --late chunk-start --cc bbr --content-seed 3 --json --csv dash-options.csv > dash-options.json
    "$bin" dash-ch6 --duration 30s --json > dash-ch6.json
    "$bin" dash-ch6 --arch request-response,hollywood --encoding 12mbit --rtt 25ms --loss 0.5% --rate 20mbit \
      --duration 20s --fps 30 --chunk-frames 15 --buffer-frames 5 --iframe-ratio 3 --cc bbr --reliable --json > dash-ch6-options.json
    "$bin" analyze table-5.1 --json > table-5.1.json
    "$bin" analyze ch6 --json > analyze-ch6.json
    "$bin" repro all --out repro > repro.log 2>&1
  )
  touch "$dir/.done"
}

if [ -f "$out/old/.done" ]; then echo "old: kept from an earlier run"; else echo "old: $old"; run_all "$old" "$out/old"; fi
[ "$new" = "--old-only" ] && exit 0
if [ -n "${COMPARE_ONLY:-}" ] && [ -f "$out/new/.done" ]; then echo "new: kept"; else echo "new: $new"; run_all "$new" "$out/new"; fi

# Mask what two runs of the same binary may differ in: wall-clock times.
mask() {
  perl -pe '
    s/"([a-z_]*wall[a-z_]*|elapsed[a-z_]*|took[a-z_]*|times_real_time)"\s*:\s*[0-9.e+-]+/"$1":WALL/g;
    s/\b[0-9]+(\.[0-9]+)?x real time\b/WALLx real time/g;
    s/\b(took|in|after) [0-9]+(\.[0-9]+)? ?(s|ms|min)\b/$1 WALL/g;
    s/\b[0-9]+(\.[0-9]+)? s wall\b/WALL/g;
    s/<td>[0-9]+(\.[0-9]+)? s<\/td>/<td>WALL<\/td>/g; s/, [0-9]+(\.[0-9]+)? s\)/, WALL)/g;
    s/\b[Ss]eeds 003 and 004\b/[TCP-video] and [RTP-QUIC]/g;
    s/\b[Ss]eeds 002 and 004\b/[QUICsilver-2019] and [RTP-QUIC]/g;
    s/\b[Ss]eed[ -]000\b/the thesis/g; s/\b[Ss]eed[ -]001\b/[DASHing-2018]/g;
    s/\b[Ss]eed[ -]002\b/[QUICsilver-2019]/g; s/\b[Ss]eed[ -]003\b/[TCP-video]/g;
    s/\b[Ss]eed[ -]004\b/[RTP-QUIC]/g;
    s/hollywood_apps::/hollywood_media::/g;
    s/RESULTS\.md 1\(a\)/REFERENCES.md thesis ch. 6, setup/g;
    s/RESULTS\.md 1\(c\)/REFERENCES.md thesis ch. 6, derived bounds/g;
    s/RESULTS\.md 1\(d\)/REFERENCES.md thesis ch. 6, claims/g;
    s/RESULTS\.md 1\(e\)/REFERENCES.md thesis ch. 6, ambiguities/g;
    s/RESULTS\.md 2\(a\)/REFERENCES.md [DASHing-2018], setup/g;
    s/RESULTS\.md 2\(e\)/REFERENCES.md [DASHing-2018], ambiguities/g;
    s/RESULTS\.md 3\(a\)/REFERENCES.md [QUICsilver-2019], setup/g;
    s/RESULTS\.md 4\(a\)/REFERENCES.md [RTP-QUIC], setup/g;
    s/RESULTS\.md 5\(a\)/REFERENCES.md [TCP-video], setup/g;
    s/RESULTS\.md 5\(e\)/REFERENCES.md [TCP-video], ambiguities/g;
    s/\[(DASHing-2018|QUICsilver-2019|TCP-video|RTP-QUIC)\]\x27s /the [$1] /g;
  ' "$1"
}

differ=0; same=0
while IFS= read -r -d '' f; do
  rel=${f#"$out/old/"}
  g="$out/new/$rel"
  if [ ! -e "$g" ]; then echo "only in old: $rel"; differ=$((differ + 1)); continue; fi
  case "$rel" in
    *.png) if cmp -s "$f" "$g"; then same=$((same + 1)); else echo "differs: $rel"; differ=$((differ + 1)); fi ;;
    *.log) ;;
    *) if diff -q <(mask "$f") <(mask "$g") >/dev/null; then same=$((same + 1)); else echo "differs: $rel"; differ=$((differ + 1)); fi ;;
  esac
done < <(find "$out/old" -type f ! -name .done -print0 | sort -z)
while IFS= read -r -d '' g; do
  rel=${g#"$out/new/"}
  [ -e "$out/old/$rel" ] || { echo "only in new: $rel"; differ=$((differ + 1)); }
done < <(find "$out/new" -type f ! -name .done -print0 | sort -z)
echo "same-outputs: $same files identical, $differ differ (old $old, new $new)"
[ "$differ" = 0 ]
