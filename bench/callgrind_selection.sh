#!/usr/bin/env bash
# Instructions per selection (select + release, 8 members), with and without the `telemetry`
# feature, no recorder or subscriber installed. Counts are exact for a given binary, whatever
# else the machine does. Usage: bench/callgrind_selection.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)"; exit 1; }
for variant in on off; do
  flags=(--release --bench selection_count --target-dir "target/callgrind-$variant")
  [ "$variant" = off ] && flags+=(--no-default-features)
  cargo build "${flags[@]}" >/dev/null 2>&1
  bin=$(ls -t "target/callgrind-$variant"/release/deps/selection_count-* | grep -v '\.d$' | head -n 1)
  for algorithm in random round_robin; do
    ir() {
      valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$algorithm" "$1" 2>&1 \
        | awk '/Collected :/ {print $4}'
    }
    base=$(ir 0); full=$(ir "$n")
    echo "telemetry=$variant $algorithm: $(( (full - base) / n )) instructions per selection"
  done
done
