#!/bin/sh
# Replay the published measured runs (README.md here) with `merak sim`:
# CSV, per-source table, scatter plot, the rows it cannot express.
# Usage: experiments/published/run.sh [--record] [replay.py options]
#   (from the build directory; MERAK=path/to/merak, PYTHON=python3 to
#   override).  --record also writes recorded.json here: the figures the
#   `make check` regression test (tests/published.sh) compares against.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${MERAK:-./merak}
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$MERAK" ] || { echo "run.sh: no merak at '$MERAK' (run from the build directory or set MERAK)" >&2; exit 2; }
rec=
if [ "${1:-}" = "--record" ]; then rec="--record $here/recorded.json"; shift; fi
exec "$PYTHON" "$here/replay.py" --merak "$MERAK" --out "$here/results" $rec "$@"
