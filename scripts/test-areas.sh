#!/usr/bin/env bash
# The integration tests (tests/it, one binary), one area after another, each with two tests at a time, so that
# two areas' containers never share this machine's two cores. scripts/test.sh runs it; alone:
#   scripts/test-areas.sh                 every area
#   scripts/test-areas.sh hosts fetch     those areas
# No area can drop out silently. The areas come from the binary's own `--list`, and the run fails when:
#   - a file or folder of tests/it (an area) has no test in the binary (its `mod` line is gone, or it has none);
#   - a test is in no area (a #[test] in main.rs);
#   - an area's run did not pass exactly the tests the list names for it.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${KUBEUNIT_TEST_THREADS:-2}

fail() { echo "test-areas: $*" >&2; exit 1; }

list=$(cargo test --locked --test it -- --list --format terse 2>/dev/null) ||
  fail "cargo test --test it -- --list failed"
tests=$(printf '%s\n' "$list" | sed -n 's/: test$//p')
[ -n "$tests" ] || fail "the binary lists no tests"

rootless=$(printf '%s\n' "$tests" | grep -v '::' || true)
[ -z "$rootless" ] || fail "tests in no area (move each into an area's file): $rootless"

listed_areas=$(printf '%s\n' "$tests" | sed 's/::.*//' | sort -u)
# Every .rs file beside main.rs, and every folder with a mod.rs, is an area.
file_areas=$(
  cd tests/it
  { ls -1 ./*.rs | sed 's|^\./||; s|\.rs$||' | grep -vx main; ls -1d ./*/ 2>/dev/null | while read -r d; do
      [ -f "$d/mod.rs" ] && basename "$d"; done; } | sort -u
)
missing=$(comm -23 <(printf '%s\n' "$file_areas") <(printf '%s\n' "$listed_areas"))
[ -z "$missing" ] ||
  fail "areas in tests/it with no test in the binary (is its \`mod\` line in tests/it/main.rs?): $(echo $missing)"
unknown=$(comm -13 <(printf '%s\n' "$file_areas") <(printf '%s\n' "$listed_areas"))
[ -z "$unknown" ] || fail "areas in the binary with no file in tests/it: $(echo $unknown)"

areas=${*:-$listed_areas}
# Every area runs even after one failed (a flaky early area hides nothing after it); the run fails at the end,
# naming each area that did.
failed=()
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for area in $areas; do
  # A here-string, not `printf | grep -q`: grep -q exits at its match, bash's printf then writes the next line
  # into a closed pipe, and pipefail reports SIGPIPE (141) as "no area" (CI, 2026-12-02: "no area 'golden'").
  grep -qx "$area" <<<"$listed_areas" || fail "no area '$area' (areas: $(echo $listed_areas))"
  mapfile -t names < <(printf '%s\n' "$tests" | grep "^$area::")
  echo "==> tests/it: $area (${#names[@]} tests)"
  log=$logs/$area.log
  # --exact with every name: the run is exactly the area's tests, whatever their names contain.
  set +e
  cargo test --locked --test it -- --test-threads="$threads" --exact "${names[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' "$log" | tail -1)
  if [ "$rc" != 0 ]; then
    echo "test-areas: area $area failed (exit $rc)" >&2
    failed+=("$area")
  elif [ "${passed:-0}" != "${#names[@]}" ]; then
    echo "test-areas: area $area passed ${passed:-0} tests, the list names ${#names[@]}" >&2
    failed+=("$area")
  else
    rm -f "$log"
  fi
done
# CI keeps the tail of a run: each failed test's panic comes again at the end, where it is kept (an area's own
# failure report is an hour of output up by then).
for area in "${failed[@]}"; do
  echo "==> what failed in area $area:" >&2
  # Each failed test's last 30 lines of output before its panic (diagnostics come there), then 40 of the panic.
  awk '
    /^---- .* stdout ----$/ { name = $2; n = 0; k = 0; next }
    /panicked at/ && name != "" {
      print "  " name ":"
      for (i = (k > 30 ? k - 30 : 0); i < k; i++) print "    " buf[i % 30]
      n = 40
    }
    /^failures:$/ { name = ""; n = 0 }
    n > 0 { print "    " $0; n--; next }
    name != "" { buf[k % 30] = $0; k++ }
    /^test result:/ { print "  " $0 }
  ' "$logs/$area.log" >&2
done
[ ${#failed[@]} -eq 0 ] || fail "areas that failed: ${failed[*]} (each one's output is above)"
