#!/bin/sh
# Predicted against measured peak memory (experiments/memory/README.md):
# the published runs in published.json and merak run's own peaks on the CPU
# executor, into results/ (memory.csv, summary.md, memory.png).
# Usage: experiments/memory/run.sh [memory.py options]   (from the build
# directory; MERAK=path/to/merak, PYTHON=python3, MPIEXEC to override)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
MERAK=${MERAK:-./merak}
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$MERAK" ] || { echo "run.sh: no merak at '$MERAK' (run from the build directory or set MERAK)" >&2; exit 2; }
exec "$PYTHON" "$here/memory.py" --merak "$MERAK" --out "$here/results" "$@"
