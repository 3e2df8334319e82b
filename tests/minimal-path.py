#!/usr/bin/env python3
"""Make a PATH that holds only what a minimal Debian 12 root would have after
the README's install line (issue 32):

  minimal-path.py README.md DIR     (then: PATH=DIR make check)

DIR receives a symlink for every program in /usr/bin and /usr/sbin (/bin and
/sbin are links to them on Debian 12) whose file belongs to an installed
package that such a root has: the packages debootstrap's minbase variant
installs (Priority: required, and the Essential ones) and the packages the
README's first `apt-get install` names, with everything they depend on
(Depends and Pre-Depends, recursively, through the installed packages that
provide a virtual name or fill an "a | b" alternative).  Anything else on
this machine (procps's pgrep, git, clang, another python3 on PATH) is
hidden, so a test that calls it fails or skips as it would on that root.
The dependency closure is read from dpkg's database: no network needed.
Prints one line: how many packages and programs DIR holds."""
import os
import re
import subprocess
import sys


def readme_packages(readme):
    """The package names of the README's first apt-get install line."""
    with open(readme) as f:
        text = f.read()
    m = re.search(r"apt-get install -y ([^&\n]*)", text)
    if not m:
        sys.exit("minimal-path: no 'apt-get install -y' line in %s" % readme)
    return [p for p in m.group(1).split() if not p.startswith("-")]


def installed():
    """{package: (priority, essential, [dependency alternatives])} and
    {virtual name: [providers]} of the installed packages."""
    fmt = "${Package}\\t${db:Status-Abbrev}\\t${Priority}\\t${Essential}\\t${Pre-Depends}, ${Depends}\\t${Provides}\\n"
    out = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True).stdout
    pkgs, provides = {}, {}
    for line in out.splitlines():
        name, status, prio, ess, deps, prov = (line.split("\t") + [""] * 6)[:6]
        if not status.startswith("ii"):
            continue
        alts = [[re.sub(r"[ (:].*", "", a.strip()) for a in d.split("|")] for d in deps.split(",") if d.strip()]
        pkgs[name] = (prio, ess == "yes", alts)
        for v in prov.split(","):
            v = re.sub(r"[ (:].*", "", v.strip())
            if v:
                provides.setdefault(v, []).append(name)
    return pkgs, provides


def closure(roots, pkgs, provides):
    """The installed packages reachable from roots through dependencies."""
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen or p not in pkgs:
            continue
        seen.add(p)
        for alt in pkgs[p][2]:
            for a in alt:  # the first alternative that is installed
                hit = [a] if a in pkgs else provides.get(a, [])
                if hit:
                    todo.extend(hit)
                    break
    return seen


def owned_files(names):
    files = set()
    for n in sorted(names):
        out = subprocess.run(["dpkg-query", "-L", n], stdout=subprocess.PIPE, universal_newlines=True).stdout
        files.update(os.path.realpath(l) for l in out.splitlines() if l.startswith("/"))
    return files


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    readme, out = argv
    pkgs, provides = installed()
    missing = [p for p in readme_packages(readme) if p not in pkgs]
    if missing:
        sys.exit("minimal-path: the README's install line names packages not installed here: " + " ".join(missing))
    base = [n for n, (prio, ess, _) in pkgs.items() if prio == "required" or ess]
    keep = closure(base + readme_packages(readme), pkgs, provides)
    files = owned_files(keep)
    os.makedirs(out, exist_ok=True)
    count = 0
    for d in ("/usr/bin", "/usr/sbin"):
        for e in sorted(os.listdir(d)):
            path = os.path.join(d, e)
            real = os.path.realpath(path)
            if real in files and os.access(real, os.X_OK) and not os.path.lexists(os.path.join(out, e)):
                os.symlink(path, os.path.join(out, e))
                count += 1
    print("minimal-path: %s: %d programs of %d packages (of %d installed)" % (out, count, len(keep), len(pkgs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
