#!/usr/bin/env bash
# The whole Hollywood test suite — the README's test command and what CI runs.
#
#   bash scripts/test.sh            # everything
#   FUZZ_SECONDS=0 bash scripts/test.sh   # skip the fuzz smoke run
#
# As root it installs the Debian packages the real-packet tests need (and the
# nightly toolchain the fuzz run needs) when they are missing, and sets
# HOLLYWOOD_REQUIRE_ROOT=1: after that, a test that would still skip is a
# missing dependency and fails, named. Not as root, those tests skip, print
# why, and the summary lists them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the one before took (CI allows 90 minutes; keep a
# fresh run near 25).
SECONDS=0; last=0
step() { printf '\n==> %s   (+%ds; %ds so far)\n' "$*" "$((SECONDS - last))" "$SECONDS"; last=$SECONDS; }

# --- system packages (root only) -------------------------------------------
# command:package pairs the root-only tests use, and files the plots need.
NEEDED="ip:iproute2 iptables:iptables nft:nftables ping:iputils-ping iperf3:iperf3 tshark:tshark haproxy:haproxy socat:socat srt-live-transmit:srt-tools chromium:chromium ffmpeg:ffmpeg nc:netcat-openbsd gst-launch-1.0:gstreamer1.0-tools node:nodejs npm:npm"
missing=()
for pair in $NEEDED; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || [ -n "${HOLLYWOOD_FONT:-}" ] || missing+=(fonts-dejavu-core)
# crates/gst (the GStreamer plugin) builds against Debian's GStreamer 1.22
# (the -dev packages and pkg-config); its pipeline test needs x264enc
# (ugly), mpegtsmux, tsdemux, srtsink/srtsrc (bad), avdec_h264 (libav).
for pkg in pkg-config libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev \
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
  gstreamer1.0-plugins-ugly gstreamer1.0-libav; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    step "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  else
    echo "note: not root and missing ${missing[*]}: real-packet tests skip; plots need a TTF font (HOLLYWOOD_FONT=path); crates/gst needs the GStreamer -dev packages to build"
  fi
fi

# crates/gst builds against GStreamer's -dev packages: without them (not
# root, not installed) it is left out, listed as a skip like a test.
GST_EXCLUDE=()
gst_skip=""
if ! pkg-config --exists gstreamer-1.0 gstreamer-base-1.0 2>/dev/null; then
  GST_EXCLUDE=(--exclude hollywood-gst)
  gst_skip="crates/gst (the GStreamer plugin) needs libgstreamer1.0-dev, libgstreamer-plugins-base1.0-dev and pkg-config (run as root to install them)"
  echo "SKIPPED: $gst_skip"
fi

# A clean checkout gains nothing from incremental artifacts, and they took
# a third of target/ (CI's disk is not large).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# --- static checks -----------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, -D warnings)"
cargo clippy --workspace "${GST_EXCLUDE[@]}" --all-targets --quiet -- -D warnings

# --- tests ------------------------------------------------------------------------
step "cargo test (workspace)"
if [ "$(id -u)" != 0 ]; then
  echo "note: not root: tests that need network namespaces and TUN skip (listed in the summary)"
else
  # As root the script installed every tool the real-packet tests use, so
  # a test that would still skip is a failure, not a silent pass
  # (HOLLYWOOD_REQUIRE_ROOT=0 to allow skips anyway).
  export HOLLYWOOD_REQUIRE_ROOT=${HOLLYWOOD_REQUIRE_ROOT:-1}
fi
# Tests that cannot run here (not root, a tool missing) log why; cargo hides
# a passing test's output, so the summary lists them. HOLLYWOOD_REQUIRE_ROOT=1
# turns every such skip into a failure.
mkdir -p target
export HOLLYWOOD_SKIP_LOG="$PWD/target/skipped-tests.txt"
: > "$HOLLYWOOD_SKIP_LOG"
if [ -n "$gst_skip" ]; then
  if [ "${HOLLYWOOD_REQUIRE_ROOT:-0}" != 0 ]; then
    echo "HOLLYWOOD_REQUIRE_ROOT is set but a step would skip: $gst_skip" >&2
    exit 1
  fi
  echo "$gst_skip" >> "$HOLLYWOOD_SKIP_LOG"
fi
# --no-fail-fast: every failing test is named, not only the first binary's.
cargo test --workspace "${GST_EXCLUDE[@]}" --no-fail-fast 2>&1 | tee target/test-output.txt
# Tests that skipped (the fuzz step below may add a line of its own).
test_skips=$(grep -c . "$HOLLYWOOD_SKIP_LOG" || true)

# --- fuzz smoke run ------------------------------------------------------------
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
if [ "$FUZZ_SECONDS" != 0 ]; then
  step "fuzz smoke run (${FUZZ_SECONDS}s per target)"
  have_nightly() { rustup toolchain list 2>/dev/null | grep -q '^nightly'; }
  if ! have_nightly && [ "$(id -u)" = 0 ] && command -v rustup >/dev/null 2>&1; then
    # As root the script installs what the suite needs, like the packages.
    step "installing the nightly toolchain (cargo-fuzz needs it)"
    rustup toolchain install nightly --profile minimal
  fi
  if ! have_nightly; then
    # A skip like a test's: listed in the summary, a failure with
    # HOLLYWOOD_REQUIRE_ROOT=1 (FUZZ_SECONDS=0 leaves the run out on purpose).
    why="fuzz smoke run (scripts/test.sh) needs a nightly toolchain for cargo-fuzz (rustup toolchain install nightly; FUZZ_SECONDS=0 to leave it out)"
    if [ "${HOLLYWOOD_REQUIRE_ROOT:-0}" != 0 ]; then
      echo "HOLLYWOOD_REQUIRE_ROOT is set but a step would skip: $why" >&2
      exit 1
    fi
    echo "SKIPPED: $why"
    echo "$why" >> "$HOLLYWOOD_SKIP_LOG"
  else
    if ! command -v cargo-fuzz >/dev/null 2>&1; then
      step "installing cargo-fuzz"
      cargo install --quiet --locked cargo-fuzz
    fi
    for t in $(cd fuzz && cargo +nightly fuzz list); do
      (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 2>&1 | tail -n 3)
    done
  fi
fi

step "done"
if [ -s "$HOLLYWOOD_SKIP_LOG" ]; then
  echo "skipped (tests among them counted as passed by cargo):"
  sed 's/^/  /' "$HOLLYWOOD_SKIP_LOG"
fi
grep -E '^test result:' target/test-output.txt | awk -v sk="$test_skips" '
  { for (i=1;i<=NF;i++) { if ($(i)=="passed;") p+=$(i-1); if ($(i)=="failed;") f+=$(i-1); if ($(i)=="ignored;") s+=$(i-1) } }
  END { printf "summary: %d passed (%d of them skipped: no root or a tool missing), %d failed, %d ignored\n", p, sk, f, s }'
