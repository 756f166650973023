#!/usr/bin/env python3
"""Why each test of the last ctest run in BUILD_DIR failed, in a few lines.

usage: failed-tests.py BUILD_DIR [LINES]

ctest prints a failed test's output where the test ended, often thousands of
lines before the end of the test command's output; CI shows only that end.
This prints, for each failed test, the lines of its output that say what
failed (GoogleTest's "Failure" and "[  FAILED  ]", the shell tests' "FAIL:",
sanitizer reports), then its last LINES lines (default 15).
"""
import pathlib
import re
import sys

SAYS_WHAT_FAILED = re.compile(
    r"^(FAIL:|\[  FAILED  \])|: Failure$|ERROR: \w+Sanitizer|runtime error:|internal check failed"
    r"|^\d+ failure\(s\)")
CONTEXT_AFTER = 3  # GoogleTest's "Expected ... Which is ..." follow its "Failure"


def outputs(log_text):
    """Test name -> (its output, whether it passed), from ctest's LastTest.log."""
    found = {}
    pattern = re.compile(r'^\d+/\d+ Test: (\S+)\n.*?^Output:\n-+\n(.*?)^<end of output>\n'
                         r'(.*?)^"', re.S | re.M)
    for match in pattern.finditer(log_text):
        found[match.group(1)] = (match.group(2).splitlines(), "Test Passed." in match.group(3))
    return found


def what_failed(lines):
    """The lines that say what failed, each with a few lines after it."""
    keep = set()
    for i, line in enumerate(lines):
        if SAYS_WHAT_FAILED.search(line):
            keep.update(range(i, min(i + 1 + CONTEXT_AFTER, len(lines))))
    return [lines[i] for i in sorted(keep)]


def main():
    build = pathlib.Path(sys.argv[1])
    tail_lines = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    temporary = build / "Testing" / "Temporary"
    failed_list = temporary / "LastTestsFailed.log"
    if not failed_list.exists():
        return 0
    names = [line.split(":", 1)[1].strip()
             for line in failed_list.read_text(errors="replace").splitlines() if ":" in line]
    log = temporary / "LastTest.log"
    found = outputs(log.read_text(errors="replace")) if log.exists() else {}
    for name in names:
        lines, passed = found.get(name, (None, False))
        if passed:  # LastTestsFailed.log of an earlier run: ctest keeps it
            continue
        print(f"-- {build.name}: {name} failed")
        if lines is None:
            print("   (its output is not in LastTest.log)")
            continue
        for line in what_failed(lines)[:30]:
            print(f"   {line[:300]}")
        print(f"   ... its last {tail_lines} lines:")
        for line in lines[-tail_lines:]:
            print(f"   {line[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
