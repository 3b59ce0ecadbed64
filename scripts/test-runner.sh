#!/usr/bin/env bash
# cargo's runner on x86_64 Linux (.cargo/config.toml). A test binary that `cargo test` runs
# (target/<profile>/deps/<name>-<hash>, libtest's harness) gets libtest's per-test times:
# --report-time is an unstable option, which RUSTC_BOOTSTRAP allows here at run time only (no
# crate is compiled with it, so nothing is rebuilt). .ci/run sorts those times into the ten
# slowest tests. Anything else (the kaiju-tui binary under `cargo run`, benches, the
# harness-less heap_policy test) is started as it is.
set -euo pipefail
bin=$1
shift
case "$bin" in
  */deps/heap_policy-*) ;;
  */deps/*)
    case " $* " in
      *" --bench "* | *" --list "* | *" --help "*) ;;
      *) RUSTC_BOOTSTRAP=1 exec "$bin" "$@" -Z unstable-options --report-time ;;
    esac
    ;;
esac
exec "$bin" "$@"
