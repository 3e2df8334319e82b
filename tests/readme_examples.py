#!/usr/bin/env python3
"""The commands README.md shows, as tests/mpi-readme.sh runs them.

usage: readme_examples.py README.md

Prints one tab-separated line per command, in the README's order:
KIND<TAB>COMMAND<TAB>EXPECTED, where KIND is `sh` (a line of a ```sh block
after the first two, the install line and `make check`, which
tests/debian-root.sh runs), `dollar` (a `$ ` line of a plain ``` block;
EXPECTED: the first output line shown under it, when it holds no timing)
or `inline` (a code span in the text with a flag or an argument: `merak
sim` alone names the subcommand).  Only commands of merak itself are
listed (`merak`, `./merak`, `mpiexec ... merak`); a span with a placeholder
(an upper-case word such as FILE or CMD, or `...`) is not a command."""
import re
import sys

TIMING = re.compile(r"\b(ms|µs|tokens/s)\b|\d s\b")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]+\b|\.\.\.")
COMMAND = re.compile(r"^(\./merak|merak|mpiexec\b.*\bmerak)(\s|$)")


def blocks(text):
    """(language, lines) of each fenced block, and the prose between them."""
    out, prose, cur, lang = [], [], None, None
    for line in text.split("\n"):
        if line.startswith("```"):
            if cur is None:
                lang, cur = line[3:].strip(), []
            else:
                out.append((lang, cur))
                cur = None
            continue
        (prose if cur is None else cur).append(line)
    return out, "\n".join(prose)


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    fenced, prose = blocks(text)
    sh = [b for b in fenced if b[0] == "sh"]
    for lang, lines in fenced:
        if lang == "sh" and sh.index((lang, lines)) >= 2:
            for l in lines:
                l = l.split("  #")[0].strip()
                if COMMAND.match(l):
                    print(f"sh\t{l}\t")
        elif lang == "":
            for i, l in enumerate(lines):
                if l.startswith("$ ") and COMMAND.match(l[2:]):
                    first = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("$ ") else ""
                    exp = "" if TIMING.search(first) or first == "..." else first
                    print(f"dollar\t{l[2:].strip()}\t{exp}")
    for span in re.findall(r"`([^`\n]+)`", prose):
        span = span.strip()
        # a command, not a name: it has a flag or an argument after the subcommand
        if COMMAND.match(span) and not PLACEHOLDER.search(span) and (" -" in span or len(span.split()) > 2):
            print(f"inline\t{span}\t")
    return 0


if __name__ == "__main__":
    sys.exit(main())
