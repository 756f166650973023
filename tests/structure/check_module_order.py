#!/usr/bin/env python3
"""Checks that every module uses only modules above it in the dependency order.

Usage: check_module_order.py REPO_ROOT      check the tree, exit 1 on a problem
       check_module_order.py --self-test    show that broken trees fail

The order is the table of docs/ARCHITECTURE.md ("Modules and the dependency
order"). Two rules, each error naming the file and the modules:
  * a .h or .cpp of module M includes no "X/..." for a module X listed after M;
  * M's CMakeLists.txt links (target_link_libraries) no ft_* target, or target
    of another module, that belongs to a module listed after M.
A target belongs to the module whose CMakeLists.txt defines it (add_library,
add_executable) or, for one not built yet, whose table row names it.
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modules import (StructureError, read_module_order, run_checker, run_main,  # noqa: E402
                     source_files, write)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')
DEFINES = re.compile(r"\badd_(?:library|executable)\(\s*([A-Za-z0-9_.+-]+)")
LINKS = re.compile(r"\btarget_link_libraries\(([^)]*)\)", re.S)
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE"}


def include_problems(root, modules):
    rank = {m: i for i, m in enumerate(modules)}
    problems = []
    for module in modules:
        for name in source_files(root, module):
            path = os.path.join(root, module, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, start=1):
                    match = INCLUDE.match(line)
                    used = match and match.group(1)
                    if used in rank and rank[used] > rank[module]:
                        problems.append(
                            f"{module}/{name}:{number}: module {module}/ includes \"{used}/...\", "
                            f"but {used}/ comes after {module}/ in docs/ARCHITECTURE.md")
    return problems


def read_cmake(root, module):
    path = os.path.join(root, module, "CMakeLists.txt")
    if not os.path.isfile(path):
        return ""  # a module without a library yet has nothing to link
    with open(path, encoding="utf-8") as f:
        # Comments could name targets; drop them.
        return "\n".join(line.split("#", 1)[0] for line in f.read().splitlines())


def target_owners(root, modules):
    """Target name -> the module that defines it."""
    owners = {}
    table = os.path.join(root, "docs", "ARCHITECTURE.md")
    with open(table, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) > 2 and cells[0].isdigit():
                module = cells[1].strip("`/")
                for target in re.findall(r"`([A-Za-z0-9_-]+)`", cells[2]):
                    owners[target] = module
    for module in modules:
        for target in DEFINES.findall(read_cmake(root, module)):
            owners[target] = module
    return owners


def link_problems(root, modules):
    rank = {m: i for i, m in enumerate(modules)}
    owners = target_owners(root, modules)
    problems = []
    for module in modules:
        for call in LINKS.findall(read_cmake(root, module)):
            for linked in call.split()[1:]:
                if linked in KEYWORDS:
                    continue
                owner = owners.get(linked)
                if owner is None and linked.startswith("ft_"):
                    problems.append(f"{module}/CMakeLists.txt: module {module}/ links {linked}, "
                                    f"which no module defines")
                elif owner is not None and rank[owner] > rank[module]:
                    problems.append(f"{module}/CMakeLists.txt: module {module}/ links {linked} of "
                                    f"{owner}/, which comes after {module}/ in docs/ARCHITECTURE.md")
    return problems


def check(root):
    modules = read_module_order(root)
    return include_problems(root, modules) + link_problems(root, modules)


def main(argv):
    return run_main("check_module_order", __doc__, argv, check, self_test)


# ---- self-test: a tiny tree, then one violation at a time ---------------------

ARCHITECTURE = """# t

## Modules and the dependency order

| # | module | target | contract | status |
|---|---|---|---|---|
| 1 | `alpha/` | `ft_alpha` | a | done |
| 2 | `beta/` | `ft_beta` | b | done |
| 3 | `gamma/` | `ft_gamma`, `gamma_tool` | c | done |

## Next
"""


def self_test():
    cases = [
        # (what is broken, change to the clean tree, text the message must hold)
        ("a header including a module below it",
         lambda r: write(r, "alpha/a.h", '#pragma once\n#include "gamma/c.h"\n'),
         'alpha/a.h:2: module alpha/ includes "gamma/...", but gamma/ comes after alpha/'),
        ("a source including a module below it",
         lambda r: write(r, "beta/b.cpp", '#include "beta/b.h"\n  #  include "gamma/c.h"\n'),
         'beta/b.cpp:2: module beta/ includes "gamma/..."'),
        ("a library linking a module below it",
         lambda r: write(r, "alpha/CMakeLists.txt",
                         "add_library(ft_alpha a.cpp)\ntarget_link_libraries(ft_alpha\n  PUBLIC fmt::fmt\n"
                         "  PRIVATE ft_beta)\n"),
         "alpha/CMakeLists.txt: module alpha/ links ft_beta of beta/, which comes after alpha/"),
        ("a link to a module's other target below it",
         lambda r: write(r, "beta/CMakeLists.txt",
                         "add_library(ft_beta b.cpp)\ntarget_link_libraries(ft_beta PUBLIC ft_alpha gamma_tool)\n"),
         "links gamma_tool of gamma/"),
        ("a link to an ft_ target of no module",
         lambda r: write(r, "beta/CMakeLists.txt",
                         "add_library(ft_beta b.cpp)\ntarget_link_libraries(ft_beta PUBLIC ft_nowhere)\n"),
         "links ft_nowhere, which no module defines"),
        ("a table numbered out of order",
         lambda r: write(r, "docs/ARCHITECTURE.md", ARCHITECTURE.replace("| 3 |", "| 4 |")),
         "row '4' for gamma/ should be numbered 3"),
    ]
    failures = 0
    for what, breaks, expected in [("nothing", None, None)] + cases:
        with tempfile.TemporaryDirectory() as root:
            write(root, "docs/ARCHITECTURE.md", ARCHITECTURE)
            write(root, "alpha/a.h", "#pragma once\n#include <vector>\n")
            write(root, "alpha/CMakeLists.txt",
                  "add_library(ft_alpha a.cpp)  # not ft_gamma\ntarget_link_libraries(ft_alpha PUBLIC fmt::fmt)\n")
            write(root, "beta/b.h", '#pragma once\n#include "alpha/a.h"\n#include "beta/other.h"\n')
            write(root, "beta/CMakeLists.txt",
                  "add_library(ft_beta b.cpp)\ntarget_link_libraries(ft_beta PUBLIC ft_alpha)\n")
            write(root, "gamma/c.h", '#pragma once\n#include "alpha/a.h"\n#include "beta/b.h"\n')
            write(root, "gamma/CMakeLists.txt",
                  "add_library(ft_gamma c.cpp)\nadd_executable(gamma_tool main.cpp)\n"
                  "target_link_libraries(gamma_tool PRIVATE ft_gamma ft_beta ft_alpha)\n")
            # Folders outside the table are not modules: tests may include anything.
            write(root, "tests/t.cpp", '#include "gamma/c.h"\n')
            if breaks:
                breaks(root)
            code, message = run_checker(__file__, root)
        ok = code == 0 if expected is None else (code == 1 and expected in message)
        print(f"{'ok  ' if ok else 'FAIL'} broken: {what}: exit {code}" + (f", {message.strip()}" if message else ""))
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
