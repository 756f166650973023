#!/usr/bin/env python3
"""Checks that every module folder opens with a map of its files.

Usage: check_module_maps.py REPO_ROOT      check the tree, exit 1 on a problem
       check_module_maps.py --self-test    show that broken trees fail

Each module of docs/ARCHITECTURE.md's table has a README.md whose "## Files"
section lists every .h and .cpp of the folder, one line each:

    - `name.h` — what it is

A source file missing from the map, a map line naming a file that does not
exist, and a module folder without README.md are errors, each named with
its module.
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modules import (StructureError, read_module_order, run_checker, run_main,  # noqa: E402
                     source_files, write)

FILES_SECTION = "## Files"
ENTRY = re.compile(r"- `([^`]+)` — \S")


def read_map(readme, shown):
    """(names the map lists, problems) from the "## Files" section of a README.md;
    `shown` is the README's name in messages."""
    with open(readme, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if FILES_SECTION not in lines:
        return [], [f"{shown}: no '{FILES_SECTION}' section (the map of the folder's files)"]
    names, problems = [], []
    for number, line in enumerate(lines[lines.index(FILES_SECTION) + 1:],
                                  start=lines.index(FILES_SECTION) + 2):
        if line.startswith("## "):
            break
        if not line.startswith("- "):
            continue
        entry = ENTRY.match(line)
        if not entry:
            problems.append(f"{shown}:{number}: map line is not '- `file` — what it is': {line!r}")
            continue
        if entry.group(1) in names:
            problems.append(f"{shown}:{number}: {entry.group(1)} is listed twice")
        names.append(entry.group(1))
    return names, problems


def check(root):
    """Problems of the tree at `root`, as messages naming file and module."""
    problems = []
    for module in read_module_order(root):
        folder = os.path.join(root, module)
        readme = os.path.join(folder, "README.md")
        if not os.path.isdir(folder):
            problems.append(f"module {module}/ (docs/ARCHITECTURE.md) has no folder {folder}")
            continue
        if not os.path.isfile(readme):
            problems.append(f"module {module}/: no {module}/README.md with the map of its files")
            continue
        listed, map_problems = read_map(readme, f"{module}/README.md")
        problems += map_problems
        present = source_files(root, module)
        for name in present:
            if name not in listed:
                problems.append(f"module {module}/: {module}/{name} is not in the map of {module}/README.md")
        for name in listed:
            if name not in present:
                problems.append(f"module {module}/: {module}/README.md lists {name}, "
                                f"which is not a .h or .cpp in {module}/")
    return problems


def main(argv):
    return run_main("check_module_maps", __doc__, argv, check, self_test)


# ---- self-test: a tiny tree, then one violation at a time ---------------------

ARCHITECTURE = """# t

## Modules and the dependency order

| # | module | target | contract | status |
|---|---|---|---|---|
| 1 | `alpha/` | `ft_alpha` | a | done |
| 2 | `beta/` | `ft_beta` | b | done |

## Next
"""


def self_test():
    cases = [
        # (what is broken, change to the clean tree, text the message must hold)
        ("a file missing from the map", lambda r: write(r, "alpha/extra.cpp"),
         "alpha/extra.cpp is not in the map of alpha/README.md"),
        ("a map line naming no file", lambda r: os.remove(os.path.join(r, "beta", "b.h")),
         "beta/README.md lists b.h"),
        ("a module without README.md", lambda r: os.remove(os.path.join(r, "beta", "README.md")),
         "no beta/README.md"),
        ("a map line without its description",
         lambda r: write(r, "beta/README.md", "# beta\n\n## Files\n\n- `b.h`\n"),
         "map line is not"),
    ]
    failures = 0
    for what, breaks, expected in [("nothing", None, None)] + cases:
        with tempfile.TemporaryDirectory() as root:
            write(root, "docs/ARCHITECTURE.md", ARCHITECTURE)
            write(root, "alpha/a.h")
            write(root, "alpha/a.cpp")
            write(root, "alpha/README.md",
                  "# alpha\n\nOffers a.\n\n## Files\n\n- `a.h` — a\n- `a.cpp` — a's code\n")
            write(root, "beta/b.h")
            write(root, "beta/README.md", "# beta\n\n## Files\n\n- `b.h` — b\n")
            write(root, "tests/not_a_module.cpp")  # folders outside the table are not checked
            if breaks:
                breaks(root)
            code, message = run_checker(__file__, root)
        ok = code == 0 if expected is None else (code == 1 and expected in message)
        print(f"{'ok  ' if ok else 'FAIL'} broken: {what}: exit {code}" + (f", {message.strip()}" if message else ""))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
