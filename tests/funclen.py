#!/usr/bin/env python3
"""No function in src/ and sim/ longer than 80 lines, no source file (.c,
.cu, .h, .cuh, include/merak/ too) longer than 700 (the project's code
style: rooms of a size you can live in).

A function body runs from a '{' in column 0 to the next '}' in column 0
(the layout every source file uses); its length is the lines between.
Prints each offender as file:line: N lines: signature, or file: N lines."""
import glob
import os
import sys

LIMIT = 80
FILE_LIMIT = 700


def signature(lines, i):
    """The nearest line above the brace that opens the declaration."""
    for j in range(i - 1, max(i - 6, -1), -1):
        if "(" in lines[j] and not lines[j].startswith((" ", "\t", "*", "/")):
            return lines[j].strip()
    return lines[i - 1].strip() if i else "?"


def check(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    bad, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("{"):
            start = i
        elif line.startswith("}") and start is not None:
            n = i - start - 1
            if n > LIMIT:
                bad.append(f"{path}:{start + 1}: {n} lines: {signature(lines, start)[:72]}")
            start = None
    return bad


def main():
    top = os.environ.get("top_srcdir", ".")
    files = sorted(f for d in ("src/*", "sim") for ext in ("*.c", "*.cu")
                   for f in glob.glob(os.path.join(top, d, ext)))
    if not files:
        print("skip: no sources under src/*/ and sim/")
        return 77
    bad = [b for f in files for b in check(f)]
    for b in bad:
        print(b)
    every = sorted(f for d in ("src/*", "sim", "include/merak") for ext in ("*.c", "*.cu", "*.h", "*.cuh")
                   for f in glob.glob(os.path.join(top, d, ext)))
    big = []
    for f in every:
        with open(f, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > FILE_LIMIT:
            big.append(f"{f}: {n} lines (at most {FILE_LIMIT})")
    for b in big:
        print(b)
    print(f"{len(files)} files, {len(bad)} functions over {LIMIT} lines; "
          f"{len(every)} sources and headers, {len(big)} over {FILE_LIMIT} lines")
    return 1 if bad or big else 0


if __name__ == "__main__":
    sys.exit(main())
