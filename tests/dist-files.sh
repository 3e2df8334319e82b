#!/bin/sh
# CI's cheap check that `make dist` ships what the build and the tests use
# (issue 32; `make distcheck` proves it in full but takes ~40 minutes):
# every file git tracks must be in the distribution, except the measured
# results listed below, which document runs and are read by nothing.
#
#   tests/dist-files.sh      (from the top of a configured git checkout)
#
# Exit 0 when all is shipped, 1 naming each file left out, 77 without git.
command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1 || { echo "no git checkout: skipped"; exit 77; }
[ -f config.status ] || { echo "dist-files: run ./configure first"; exit 1; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
make distdir distdir="$d/dist" >"$d/make.out" 2>&1 || { tail -20 "$d/make.out"; exit 1; }
(cd "$d/dist" && find . -type f | sed 's|^\./||' | sort) >"$d/shipped"
git ls-files | sort >"$d/tracked"
# measured results, pictures of runs, and git's own files: not shipped
not_shipped='^(experiments/[^/]*/results[^/]*/|experiments/validate/results-vm/|experiments/train-shakespeare/(loss\.png|losses\.csv)$|traces/profiles/|(.*/)?\.gitignore$)'
comm -23 "$d/tracked" "$d/shipped" | grep -v -E "$not_shipped" >"$d/missing"
n=$(wc -l <"$d/missing")
if [ "$n" -ne 0 ]; then
  sed 's/^/dist-files: not in make dist: /' "$d/missing"
  echo "dist-files: $n tracked file(s) missing from the distribution (add them to EXTRA_DIST)"
  exit 1
fi
echo "dist-files: all $(wc -l <"$d/tracked") tracked files shipped but $(comm -23 "$d/tracked" "$d/shipped" | wc -l) measured results"
