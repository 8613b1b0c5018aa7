#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each, one at a time (-jobs=1): run.sh SECONDS [BUILD_DIR] [TARGET...].
# Seeds: tests/fuzz/corpus/<target> (read-only); new inputs go to BUILD_DIR/corpus/<target>; crashes to BUILD_DIR/crashes.
# Exit status: non-zero when any target finds a crash, leak, timeout or out-of-memory.
# PARPLAN_FUZZ_KEEP_GOING=1: long runs in libFuzzer's fork mode with one worker, recording findings and going on.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-30}"
build="$(realpath -m "${2:-build/fuzz}")"
shift $(( $# >= 2 ? 2 : $# ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for exe in "$build"/tests/fuzz/fuzz_*; do targets+=("$(basename "$exe" | sed 's/^fuzz_//')"); done
fi
mkdir -p "$build/crashes"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  extra=()
  [ "${PARPLAN_FUZZ_KEEP_GOING:-0}" = 1 ] && extra=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  dict=()
  [ -f "tests/fuzz/dict/$t.dict" ] && dict=("-dict=$PWD/tests/fuzz/dict/$t.dict")
  echo "== fuzz_$t for ${secs}s"
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" "${dict[@]}" "${extra[@]}" \
      "$build/corpus/$t" "$PWD/tests/fuzz/corpus/$t" 2>"$build/fuzz_$t.log"; then
    status=1
    tail -n 40 "$build/fuzz_$t.log"
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ *DONE" "$build/fuzz_$t.log" || true
  grep -E "^#[0-9]+: cov:" "$build/fuzz_$t.log" | tail -n 1 || true
done
exit $status
