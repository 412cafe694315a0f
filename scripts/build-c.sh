#!/usr/bin/env bash
# Build the C library (libhollywood.so, libhollywood.a; release) and write
# its pkg-config file next to it. Then, e.g.:
#   PKG_CONFIG_PATH=$PWD/target/release cc examples/c/voice.c \
#     $(pkg-config --cflags --libs --static hollywood) -o voice
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p hollywood-taps-c
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
sed -e "s|@LIBDIR@|$PWD/target/release|" \
    -e "s|@INCLUDEDIR@|$PWD/crates/taps-c/include|" \
    -e "s|@VERSION@|$version|" \
    crates/taps-c/hollywood.pc.in > target/release/hollywood.pc
echo "wrote target/release/hollywood.pc; use PKG_CONFIG_PATH=$PWD/target/release"
