#!/usr/bin/env python3
"""Pass only if a C++ file fails to compile with an expected message.

Usage (from tests/cpp/compile_fail/meson.build):
    expect_fail.py --compdb BUILD/compile_commands.json --probe PROBE.cpp \
                   --expect SUBSTRING CASE.cpp

The compiler command is the one Meson recorded for PROBE.cpp in compile_commands.json,
with the probe source swapped for CASE.cpp and the object output replaced by
-fsyntax-only, so the case is compiled with exactly the project's flags and include
directories. Exit status: 0 when compilation fails and the output contains SUBSTRING;
1 when it compiles, or fails without SUBSTRING (the output is printed either way);
2 on a usage or set-up error.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys

# Options of the recorded command that name the output; dropped with their argument.
_OUTPUT_OPTS_WITH_ARG = {"-o", "-MQ", "-MF", "-MT"}
# Flags dropped on their own: dependency-file generation and "compile only".
_OUTPUT_FLAGS = {"-MD", "-MMD", "-c"}
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def probe_command(compdb_path, probe):
    """The argv and working directory Meson recorded for the probe source."""
    with open(compdb_path, encoding="utf-8") as f:
        entries = json.load(f)
    probe_real = os.path.realpath(probe)
    for entry in entries:
        directory = entry["directory"]
        if os.path.realpath(os.path.join(directory, entry["file"])) != probe_real:
            continue
        argv = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
        return argv, directory, entry["file"]
    raise LookupError(f"{probe} has no entry in {compdb_path}")


def case_command(argv, probe_file, case):
    """argv with the probe's output options removed and the case as the only source."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _OUTPUT_OPTS_WITH_ARG:
            skip = True
        elif arg in _OUTPUT_FLAGS or arg == probe_file:
            pass
        elif arg.startswith("-fdiagnostics-color"):
            out.append("-fdiagnostics-color=never")  # no escape codes inside the text
        else:
            out.append(arg)
    return out + ["-fsyntax-only", os.path.abspath(case)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compdb", required=True, help="path of compile_commands.json")
    ap.add_argument("--probe", required=True, help="source whose command is reused")
    ap.add_argument("--expect", required=True, help="substring the compiler must print")
    ap.add_argument("case", help="the C++ file that must not compile")
    args = ap.parse_args()

    try:
        argv, directory, probe_file = probe_command(args.compdb, args.probe)
    except (OSError, ValueError, LookupError) as e:
        print(f"expect_fail: cannot find the compile command: {e}", file=sys.stderr)
        return 2
    cmd = case_command(argv, probe_file, args.case)
    # C locale: plain ASCII quotes in diagnostics, so expected substrings are stable.
    env = dict(os.environ, LC_ALL="C", LANG="C")
    proc = subprocess.run(cmd, cwd=directory, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace")
    output = _ANSI_ESCAPE.sub("", proc.stdout)
    print("$ " + shlex.join(cmd))
    print(output, end="")
    name = os.path.basename(args.case)
    if proc.returncode == 0:
        print(f"FAIL: {name} compiled, but it must not compile")
        return 1
    if args.expect not in output:
        print(f"FAIL: {name} failed to compile, but the output lacks {args.expect!r}")
        return 1
    print(f"OK: {name} fails to compile with {args.expect!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
