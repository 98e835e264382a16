#!/usr/bin/env bash
# The integration tests (tests/it, one binary), one area after another, each with two tests at a time, so that
# two areas' containers never share this machine's two cores. scripts/test.sh runs it; alone:
#   scripts/test-areas.sh                      every area
#   scripts/test-areas.sh --tier presubmit     every area but those tests/full-only.txt names (scripts/test.sh)
#   scripts/test-areas.sh --tier full          every area (scripts/test.sh --full)
#   scripts/test-areas.sh hosts fetch          those areas
#   --report FILE                              write its report (below) to FILE instead of printing it
# It ends with its report: a table of each area's result, tests and seconds, then each failed test's output
# before its panic and the panic (the harness puts the journal's tail there), last: CI keeps the tail.
# No area can drop out silently. The areas come from the binary's own `--list`, and the run fails when:
#   - a file or folder of tests/it (an area) has no test in the binary (its `mod` line is gone, or it has none);
#   - a test is in no area (a #[test] in main.rs);
#   - an area's run did not pass exactly the tests the list names for it.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${KUBEUNIT_TEST_THREADS:-2}

fail() { echo "test-areas: $*" >&2; exit 1; }

tier="" report=""
while [ $# -gt 0 ]; do
  case $1 in
    --tier) [ $# -ge 2 ] || fail "--tier needs presubmit or full"; tier=$2; shift 2 ;;
    --report) [ $# -ge 2 ] || fail "--report needs a FILE"; report=$2; shift 2 ;;
    --*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
case $tier in "" | presubmit | full) ;; *) fail "--tier $tier: presubmit or full" ;; esac
[ -z "$tier" ] || [ $# = 0 ] || fail "--tier and areas: give one or the other"

# The test binary, built once: every area runs this one, so that an edit meanwhile changes nothing of the run
# (`cargo test` per area would build it again).
bin=$(cargo test --locked --test it --no-run --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "it":
        print(m["executable"])
') || fail "cargo test --test it --no-run failed"
[ -x "$bin" ] || fail "cargo test --test it --no-run named no test binary"
list=$("$bin" --list --format terse 2>/dev/null) || fail "$bin --list failed"
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

# The areas only `--tier full` runs: the first word of each line of tests/full-only.txt (the rest says why).
full_only=$(sed -n 's/^\([a-z_]\+\)[[:space:]].*/\1/p' tests/full-only.txt)
stale=$(comm -23 <(printf '%s\n' "$full_only" | sort -u) <(printf '%s\n' "$listed_areas"))
[ -z "$stale" ] || fail "tests/full-only.txt names areas that are not in tests/it: $(echo $stale)"
case $tier in
  presubmit) areas=$(comm -23 <(printf '%s\n' "$listed_areas") <(printf '%s\n' "$full_only" | sort -u)) ;;
  full) areas=$listed_areas ;;
  *) areas=${*:-$listed_areas} ;;
esac
# Every area runs even after one failed (a flaky early area hides nothing after it); the run fails at the end,
# naming each area that did.
failed=()
table=()
suite_start=$(date +%s)
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
  area_start=$(date +%s)
  "$bin" --test-threads="$threads" --exact "${names[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  seconds=$(($(date +%s) - area_start))
  set -e
  passed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' "$log" | tail -1)
  result=ok
  if [ "$rc" != 0 ]; then
    echo "test-areas: area $area failed (exit $rc)" >&2
    failed+=("$area")
    result=FAILED
  elif [ "${passed:-0}" != "${#names[@]}" ]; then
    echo "test-areas: area $area passed ${passed:-0} tests, the list names ${#names[@]}" >&2
    failed+=("$area")
    result=FAILED
  else
    rm -f "$log"
  fi
  table+=("$(printf '%-16s %-7s %3s/%-3s %6s' "$area" "$result" "${passed:-0}" "${#names[@]}" "$seconds")")
done
# The report: the table of areas (each one's result, tests passed of those listed, and seconds), then what
# failed. CI keeps the tail of a run: each failed test's panic comes again here, at the end (an area's own
# failure report is an hour of output up by then).
{
  echo "==> tests/it: the areas${tier:+ of the $tier tier}"
  printf '%-16s %-7s %7s %6s\n' AREA RESULT TESTS SECONDS
  printf '%s\n' "${table[@]}"
  printf '%-16s %-7s %7s %6s\n' all "$([ ${#failed[@]} = 0 ] && echo ok || echo FAILED)" "" "$(($(date +%s) - suite_start))"
  for area in "${failed[@]}"; do
    echo "==> what failed in area $area:"
    # Each failed test's last 12 lines of output before its panic (diagnostics come there), then 36 of the
    # panic, up to its backtrace: one failure fits the 60 lines CI keeps.
    awk '
      /^---- .* stdout ----$/ { name = $2; n = 0; k = 0; next }
      /panicked at/ && name != "" {
        print "  " name ":"
        for (i = (k > 12 ? k - 12 : 0); i < k; i++) print "    " buf[i % 12]
        n = 36
      }
      /^failures:$/ { name = ""; n = 0 }
      n > 0 && /^stack backtrace:$/ { n = 0 }
      n > 0 { print "    " $0; n--; next }
      name != "" { buf[k % 12] = $0; k++ }
      /^test result:/ { print "  " $0 }
    ' "$logs/$area.log"
  done
  [ ${#failed[@]} -eq 0 ] || echo "test-areas: areas that failed: ${failed[*]}"
} >"$logs/report"
# With --report, whoever asked prints it (scripts/test.sh, last of all).
if [ -n "$report" ]; then cp "$logs/report" "$report"; else cat "$logs/report"; fi
[ ${#failed[@]} -eq 0 ] || exit 1
