#!/usr/bin/env bash
# hollywoodsink/src against srtsink/srtsrc on the same emulated path
# (issue 33, item 1; docs/GSTREAMER.md): 30 s of 720p30 (x264, 2.5 Mb/s,
# MPEG-TS) over 100 ms RTT and 2 % loss each way, equal latency on both;
# then both again with UDP to the receiver dropped by iptables. One line
# per run: frames the receiver's sink rendered on time (of 900).
#
#   sudo bash scripts/gst-compare.sh                    # 30 s, latency 400 ms
#   GST_COMPARE_SECONDS=10 GST_COMPARE_LATENCY_MS=300 sudo -E bash scripts/gst-compare.sh
#   GST_COMPARE_REORDER_MS=300 GST_COMPARE_SRC_PROPS=do-timestamp=false …   # hollywoodsrc properties
#
# Root (namespaces and the lab's emulator); the GStreamer packages of
# scripts/test.sh. Takes about 4 × (seconds + 12) s after the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --release -p hollywood-gst --test pipeline -- \
  --ignored --exact compare_with_srt --nocapture --test-threads=1
