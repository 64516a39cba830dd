#!/usr/bin/env bash
# fuzz.sh TIME fuzzes every fuzz target of the module for TIME each (make
# fuzz, make fuzz-smoke). The targets are every func FuzzXxx in a _test.go
# file (bench/river, a module of its own, has none), found afresh each time,
# so a new one is never missed. Run it from the repository's root; GO names
# the go command.
#
# A real finding fails at once: go test prints "Failing input written to
# testdata/fuzz/…" (or a panic, or the target's own error). Go 1.26's fuzzing
# coordinator also fails, now and then, as the time runs out, with a bare
# "context deadline exceeded" and no failing input: its stop races the
# deadline (go.dev/issue/75804, fixed in Go 1.27). Such a run is fuzzed once
# more; a second failure of any kind fails.
set -u
run=${1:?usage: fuzz.sh TIME (a -fuzztime: 2s, 30s, 1000x)}
go=${GO:-go}

# deadline_race reports whether a failed run's output is the coordinator's
# race and nothing else.
deadline_race() {
  grep -qx '    context deadline exceeded' <<<"$1" &&
    ! grep -q -e 'Failing input written' -e '^panic:' -e '_test\.go:[0-9]*:' <<<"$1"
}

files=$( (git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go' -not -path '*/node_modules/*') |
  grep -v '^bench/river/' | xargs grep -l '^func Fuzz')
n=0 races=0
for file in $files; do
  dir=./$(dirname "$file")
  for f in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    n=$((n + 1))
    for try in 1 2; do
      echo "== $dir $f ($run)"
      out=$("$go" test -run='^$' -fuzz="^$f\$" -fuzztime="$run" "$dir" 2>&1)
      rc=$?
      printf '%s\n' "$out"
      [ "$rc" -eq 0 ] && break
      if [ "$try" -eq 1 ] && deadline_race "$out"; then
        races=$((races + 1))
        echo "== $f: a bare 'context deadline exceeded', no failing input (go.dev/issue/75804): fuzzing it once more"
        continue
      fi
      exit 1
    done
  done
done
echo "fuzzed $n targets for $run each ($races run again after the coordinator's deadline race)"
