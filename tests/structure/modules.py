"""The module list of docs/ARCHITECTURE.md, shared by the structure checks.

The table under "## Modules and the dependency order" is the one place that
says which top-level folders are modules and in which order they may use one
another: a module uses only modules listed above it. Folders not in the table
(tests/, bench/, include/, scripts/, examples/) are not modules.
"""

import os
import re
import subprocess
import sys

SECTION = "## Modules and the dependency order"


class StructureError(Exception):
    """A tree the checks cannot read (no table, a malformed row)."""


def read_module_order(root):
    """Module folder names in dependency order, from docs/ARCHITECTURE.md."""
    path = os.path.join(root, "docs", "ARCHITECTURE.md")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise StructureError(f"{path}: cannot read the module table ({e.strerror})")
    try:
        start = lines.index(SECTION) + 1
    except ValueError:
        raise StructureError(f"{path}: no section '{SECTION}'")
    modules = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or not cells[0].isdigit():
            continue  # prose, the header row or the |---| row
        match = re.fullmatch(r"`([a-z_][a-z0-9_]*)/`", cells[1])
        if not match:
            raise StructureError(f"{path}: row {cells[0]}: module cell {cells[1]!r} is not `name/`")
        if int(cells[0]) != len(modules) + 1:
            raise StructureError(
                f"{path}: row '{cells[0]}' for {match.group(1)}/ should be numbered {len(modules) + 1}")
        modules.append(match.group(1))
    if not modules:
        raise StructureError(f"{path}: the section '{SECTION}' has no module rows")
    return modules


def source_files(root, module):
    """Every .h and .cpp under a module folder, relative to it, sorted."""
    folder = os.path.join(root, module)
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in filenames:
            if name.endswith((".h", ".cpp")):
                found.append(os.path.relpath(os.path.join(dirpath, name), folder))
    return sorted(found)


# ---- shared by the checks' command lines and self-tests ------------------------

def run_main(name, doc, argv, problems_of, self_test):
    """The checks' command line: ROOT (exit 1 on problems) or --self-test."""
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(doc.strip(), file=sys.stderr)
        return 2
    try:
        problems = problems_of(argv[1])
    except StructureError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(f"{name}: {p}", file=sys.stderr)
    return 1 if problems else 0


def write(root, path, text=""):
    """Writes a file of a self-test's tree, making its folders."""
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def run_checker(script, root):
    """Runs a check script on `root` as the test command does: (exit code, stderr)."""
    done = subprocess.run([sys.executable, os.path.abspath(script), root],
                          capture_output=True, text=True)
    return done.returncode, done.stderr
