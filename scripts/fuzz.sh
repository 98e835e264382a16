#!/usr/bin/env bash
# Fuzz kubeunit's untrusted inputs with cargo-fuzz (libFuzzer, nightly Rust): a profile with --set
# values, a unit file read back, a state dir's manifest, and `kubeunit import` of a hostile dir.
#   scripts/fuzz.sh                 every target 300 s, two at a time (one per core)
#   scripts/fuzz.sh 60 import       one target, 60 s
# Seeds: the built-in profiles and a `gen --profile dev` state dir's units and manifest. The corpus
# is kept in $KUBEUNIT_CACHE/fuzz (reused by the next run). A crash or hang stops that target: its
# input is in fuzz/artifacts/TARGET/, and becomes a regression test in the suite. The summary is
# written to fuzz/results/fuzz-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(profile unit_file manifest import)
cache=${KUBEUNIT_CACHE:-$HOME/.cache/kubeunit-test}
corpus=$cache/fuzz
export PATH=$HOME/.cargo/bin:$PATH
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
rustup run nightly rustc --version >/dev/null || {
  echo "fuzz.sh: cargo-fuzz needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 2
}

# Seeds, from what kubeunit itself writes.
cargo build --release --locked --quiet
seed_dir=$(mktemp -d)
trap 'rm -rf "$seed_dir"' EXIT
target/release/kubeunit gen --profile dev --seed 1 --state-dir /var/lib/kubeunit/fuzz-seed \
  --out "$seed_dir/dev" >/dev/null
mkdir -p "$corpus"/{profile,unit_file,manifest,import}
cp profiles/*.yaml "$corpus/profile/"
cp "$seed_dir"/dev/units/* "$corpus/unit_file/"
cp "$seed_dir/dev/manifest.json" "$corpus/manifest/"

echo "==> building the targets (nightly, address sanitizer)"
cargo +nightly fuzz build --fuzz-dir fuzz

stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=fuzz/results/fuzz-$stamp.txt
mkdir -p fuzz/results "$cache/fuzz-logs"
run_one() {
  local t=$1 log=$cache/fuzz-logs/$t-$stamp.log rc=0
  cargo +nightly fuzz run --fuzz-dir fuzz "$t" "$corpus/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  local runs cov
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n1)
  local verdict="no crash, no hang"
  [ "$rc" = 0 ] || verdict="FAILED (exit $rc): $(grep -m1 -E 'ERROR|panicked|Test unit written' "$log" || true)"
  echo "$t: ${seconds}s, ${runs:-?} runs, ${cov:-cov ?}, corpus $(find "$corpus/$t" -type f | wc -l) inputs: $verdict"
  return "$rc"
}
{
  echo "# scripts/fuzz.sh $seconds ${targets[*]}: $(date -u +%FT%TZ), kubeunit $(git rev-parse --short HEAD), $(rustup run nightly rustc --version)"
  echo "# $(nproc) CPUs; two targets at a time; logs in $cache/fuzz-logs"
} >"$results"
failed=0
# Two at a time: one libFuzzer process per core.
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  pids=()
  for t in "${targets[@]:i:2}"; do
    run_one "$t" >"$seed_dir/$t.result" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  for t in "${targets[@]:i:2}"; do cat "$seed_dir/$t.result" | tee -a "$results"; done
done
echo "results: $results"
exit "$failed"
