#!/usr/bin/env bash
# mutants.sh applies one-line mutants of the liveness core, one at a time,
# runs the named packages' tests on each, and says which the tests kill
# (docs/testing.md). A mutant the tests let through is a rule no test holds.
#
#   scripts/mutants.sh                      # every mutant of scripts/mutants.txt
#   scripts/mutants.sh 'decide-|probe-'     # those whose name matches
#   MUTANTS_FILE=other.txt scripts/mutants.sh
#
# The list's format is described at its top. Each mutant counts as killed
# when at least its `need` distinct tests fail (a test's subtests count
# as that test); fewer is WEAK, none SURVIVED, and a mutant whose text is
# not found or that does not build is INVALID. The exit status is 0 only
# when every mutant is killed.
#
# It never touches the working tree: it copies it (tracked and untracked
# files, uncommitted changes included, ignored files left out) to a
# temporary directory, first runs each package's tests there unchanged
# (they must pass, or no kill means anything), then changes the copy's
# file for each mutant and puts the original back after it.
#
# Environment:
#   MUTANTS_FILE     the list (default scripts/mutants.txt)
#   MUTANTS_TIMEOUT  go test -timeout per package run (default 10m)
#   MUTANTS_LOGS     a directory to keep each run's go test -json in
#                    (<name>.json; baseline.json), to read why tests failed
#   GOFLAGS          as for go test (e.g. -race)
#
# Not part of .ci/run: it runs the packages' tests once per mutant.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

list=${MUTANTS_FILE:-scripts/mutants.txt}
timeout=${MUTANTS_TIMEOUT:-10m}
logs=${MUTANTS_LOGS:-}
[ -z "$logs" ] || mkdir -p "$logs"
match=${1:-}
[ -f "$list" ] || { echo "no mutants list $list" >&2; exit 2; }
src=$(pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/sessiond-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The working tree as it is, without .git (go builds no VCS stamp there)
# and without what git ignores.
git ls-files -z --cached --others --exclude-standard --deduplicate |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$work"
if ! git diff --quiet HEAD 2>/dev/null || [ -n "$(git ls-files --others --exclude-standard)" ]; then
  echo "note: testing the working tree, uncommitted changes included"
fi

# runpkgs ENTRIES... runs each entry's tests (pkg or pkg=REGEX) in the
# copy, writing go test -json to $work/.out. It returns go test's status
# (non-zero if any entry failed).
runpkgs() {
  local rc=0 e pkg re
  : >"$work/.out"
  for e in "$@"; do
    pkg=${e%%=*}
    re=
    [ "$pkg" = "$e" ] || re=${e#*=}
    (cd "$work" && go test -json -count=1 -timeout "$timeout" ${re:+-run "$re"} "$pkg") >>"$work/.out" 2>&1 || rc=$?
  done
  return "$rc"
}

# failing prints the distinct tests that failed in $work/.out, as
# package.Test (subtests folded into their test), one a line.
failing() {
  grep '"Action":"fail"' "$work/.out" | grep '"Test":"' |
    sed -E 's/.*"Package":"([^"]*)".*"Test":"([^"/]*).*/\1.\2/; s#^github.com/sessiond/sessiond/##' |
    sort -u || true
}

# mutate FILE N changes the copy of FILE: $OLD replaced by $NEW in the
# Nth line holding $OLD (N empty: $OLD must be on exactly one line).
# Literal text, no patterns.
mutate() {
  local file=$1 n=$2 count
  [ -f "$src/$file" ] || { echo "no file $file"; return 1; }
  # The texts go through the environment: awk -v would read backslashes.
  count=$(awk 'index($0, ENVIRON["OLD"]) { c++ } END { print c + 0 }' "$src/$file")
  if [ -z "$n" ]; then
    [ "$count" = 1 ] || { echo "on $count lines of $file, want exactly 1"; return 1; }
    n=1
  elif [ "$count" -lt "$n" ]; then
    echo "on $count lines of $file, want at least $n"
    return 1
  fi
  N=$n awk '
    index($0, ENVIRON["OLD"]) && ++c == ENVIRON["N"] {
      i = index($0, ENVIRON["OLD"])
      $0 = substr($0, 1, i - 1) ENVIRON["NEW"] substr($0, i + length(ENVIRON["OLD"]))
    }
    { print }' "$src/$file" >"$work/$file"
  ! cmp -s "$src/$file" "$work/$file" || { echo "the new text is the old"; return 1; }
}

declare -a names needs files pkgs olds news
while IFS=$'\t' read -r name need file pk old new; do
  case "$name" in '' | '#'*) continue ;; esac
  if [ -n "$match" ] && ! [[ $name =~ $match ]]; then continue; fi
  if ! [[ $need =~ ^[0-9]+$ ]] || [ -z "$file" ] || [ -z "$pk" ] || [ -z "$old" ]; then
    echo "$list: mutant $name: want 6 tab-separated fields (see the list's top)" >&2
    exit 2
  fi
  names+=("$name") needs+=("$need") files+=("$file") pkgs+=("$pk") olds+=("$old") news+=("$new")
done <"$list"
[ ${#names[@]} -gt 0 ] || { echo "no mutant matches ${match:-anything} in $list" >&2; exit 2; }

# Baseline: each package entry once, unchanged.
declare -A base=()
for pk in "${pkgs[@]}"; do
  for e in $pk; do base[$e]=1; done
done
echo "baseline: ${!base[*]}"
if runpkgs "${!base[@]}"; then rc=0; else rc=$?; fi
[ -z "$logs" ] || cp "$work/.out" "$logs/baseline.json"
if [ "$rc" != 0 ]; then
  echo "the tests fail without any mutant:" >&2
  failing >&2
  grep -v '^{' "$work/.out" | tail -20 >&2 || true
  exit 1
fi

killed=0
total=${#names[@]}
for i in "${!names[@]}"; do
  name=${names[$i]} need=${needs[$i]} file=${files[$i]%%#*} n=
  [ "$file" = "${files[$i]}" ] || n=${files[$i]#*#}
  start=$SECONDS
  if ! why=$(OLD=${olds[$i]} NEW=${news[$i]} mutate "$file" "$n"); then
    printf '%-9s %-32s %s\n' INVALID "$name" "text not found: $why"
    continue
  fi
  # shellcheck disable=SC2086 # entries are split on spaces on purpose
  if runpkgs ${pkgs[$i]}; then rc=0; else rc=$?; fi
  cp "$src/$file" "$work/$file" # the original back
  [ -z "$logs" ] || cp "$work/.out" "$logs/$name.json"
  took=$((SECONDS - start))
  if grep -qE '"Action":"build-fail"|\[build failed\]|\[setup failed\]' "$work/.out"; then
    printf '%-9s %-32s %s\n' INVALID "$name" "does not build (${took}s)"
    continue
  fi
  tests=$(failing)
  nt=0
  [ -z "$tests" ] || nt=$(printf '%s\n' "$tests" | wc -l)
  list_=$(printf '%s\n' "$tests" | paste -sd ' ' -)
  if [ "$rc" = 0 ]; then
    printf '%-9s %-32s %s\n' SURVIVED "$name" "no test failed (${took}s)"
  elif [ "$nt" -lt "$need" ]; then
    printf '%-9s %-32s %s\n' WEAK "$name" "$nt failing test(s), want $need (${took}s): ${list_:-none named (a crash or timeout)}"
  else
    killed=$((killed + 1))
    printf '%-9s %-32s %s\n' killed "$name" "$nt failing test(s) (${took}s): $list_"
  fi
done
echo "killed $killed of $total"
[ "$killed" = "$total" ]
