#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the module for a short fixed time each
# and fails loudly if any finds a crasher.
#
#   scripts/fuzz.sh                 # every target, 10 s each
#   FUZZTIME=2m scripts/fuzz.sh     # longer
#   FUZZ_MATCH=Claude|Line scripts/fuzz.sh ./adapters/...   # some targets, some packages
#
# Environment:
#   FUZZTIME          time per target (default 10s; a count like 5000x works too)
#   FUZZ_MINIMIZETIME time to minimize a new input (default 1s; the default of
#                     go test, 60s, can eat a short run whole)
#   FUZZ_MATCH        only targets whose name matches this extended regexp
#
# Targets are found with `go test -list` in every package that has a
# func Fuzz... in a test file. Each runs on its own, so one crasher does not
# hide the others. A crasher is written by go test to the package's
# testdata/fuzz/<FuzzName>/ directory; this script prints that path and the
# command that replays it. Commit the file with the fix: it becomes a seed
# that every `go test` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

fuzztime=${FUZZTIME:-10s}
minimize=${FUZZ_MINIMIZETIME:-1s}
match=${FUZZ_MATCH:-}
[ $# -gt 0 ] || set -- ./...

# Packages with a fuzz target: a cheap grep first, then go test -list for
# the exact names (it compiles the test binary).
targets=()
while read -r dir pkg; do
  grep -qs '^func Fuzz' "$dir"/*_test.go || continue
  while read -r name; do
    [[ $name == Fuzz* ]] || continue
    if [ -n "$match" ] && ! [[ $name =~ $match ]]; then continue; fi
    targets+=("$pkg $dir $name")
  done < <(go test -list '^Fuzz' "$pkg")
done < <(go list -f '{{.Dir}} {{.ImportPath}}' "$@")

if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets found in $*${match:+ matching $match}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} targets, $fuzztime each (minimize $minimize)"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
summary=()
start=$(date +%s)
for t in "${targets[@]}"; do
  read -r pkg dir name <<<"$t"
  printf '\n== %s %s\n' "$pkg" "$name"
  set +e
  go test -run "^${name}\$" -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}' || true)
  interesting=$(grep -o 'new interesting: [0-9]*' "$log" | tail -1 | awk '{print $3}' || true)
  if [ $rc -eq 0 ]; then
    tail -n 3 "$log"
    summary+=("$(printf '%-28s %-45s %10s execs %6s new  ok' "$name" "${pkg#github.com/sessiond/sessiond/}" "${execs:-?}" "${interesting:-?}")")
    continue
  fi
  if ! grep -q 'Failing input written' "$log" && grep -q '^    context deadline exceeded$' "$log" &&
    [ "$(grep -c '^--- FAIL' "$log")" = 1 ]; then
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
    # failure (go.dev/issue/75804, fixed in 1.27): no input, not a crasher.
    tail -n 6 "$log"
    echo "fuzz.sh: $name: ignoring 'context deadline exceeded' at the fuzztime boundary (go.dev/issue/75804; no crasher written)"
    summary+=("$(printf '%-28s %-45s %10s execs %6s new  ok (deadline race)' "$name" "${pkg#github.com/sessiond/sessiond/}" "${execs:-?}" "${interesting:-?}")")
    continue
  fi
  cat "$log"
  failed+=("$pkg $name")
  summary+=("$(printf '%-28s %-45s %10s execs %6s new  FAILED' "$name" "${pkg#github.com/sessiond/sessiond/}" "${execs:-?}" "${interesting:-?}")")
  entry=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | tail -1)
  echo
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  if [ -n "$entry" ]; then
    echo "!!! $name found a crasher: $dir/$entry"
    echo "!!! replay: go test -run '$name/${entry##*/}' $pkg"
    echo "!!! the input (CI machines do not keep it):"
    head -c 4000 "$dir/$entry" | sed 's/^/!!!   /'
    echo
  else
    echo "!!! $name failed (exit $rc) without writing an input: see the output above"
  fi
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
done

printf '\n== summary (%ss)\n' "$(( $(date +%s) - start ))"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo
  echo "fuzz.sh: ${#failed[@]} of ${#targets[@]} targets FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz.sh: all ${#targets[@]} targets passed"
