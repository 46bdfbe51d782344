"""python -m dynexpr explain MODULE:FUNCTION --args-from MODULE:MAKE_ARGS
python -m dynexpr cache ls | info KEY | clear | why-miss MODULE:FUNCTION --args-from ...
python -m dynexpr precompile MANIFEST -o BUNDLE [-j N] [--isa LIST]

Prints dynexpr.explain's report for one call of FUNCTION (a plain or captured function,
found by importing MODULE; a dotted name after the colon reaches a method or nested
attribute) with the arguments MAKE_ARGS() returns: a tuple of positional arguments, a
dict of keyword arguments, or a (tuple, dict) pair. Nothing is compiled or run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any


def _load(spec: str, what: str) -> Any:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise SystemExit(f"dynexpr: {what} must look like module:name, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise SystemExit(f"dynexpr: cannot import {module!r} for {what}: {e}") from None
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"dynexpr: {module!r} has no attribute {name!r} ({what})") from None
    return obj


def _split_args(made: Any) -> tuple[tuple, dict]:
    if isinstance(made, dict):
        return (), made
    if (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], tuple)
            and isinstance(made[1], dict)):
        return made
    if isinstance(made, (tuple, list)):
        return tuple(made), {}
    return (made,), {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dynexpr",
                                 description="dynexpr's command line: explain a capture, "
                                             "look into the cache, list the ops")
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("explain", help="print dynexpr.explain for one call")
    ex.add_argument("function", help="module:function (or module:Class.method)")
    ex.add_argument("--args-from", required=True, metavar="MODULE:MAKE_ARGS",
                    help="a function returning the arguments: a tuple, a dict of keywords, "
                         "or (tuple, dict)")
    from dynexpr.artifacts import cli as artifacts_cli
    from dynexpr.artifacts import precompile

    artifacts_cli.add_parser(sub)
    precompile.add_parser(sub)
    sub.add_parser("ops", help="list the ops and dtypes of the op manifest "
                               "(include/dynexpr/ops/manifest.py)")
    ns = ap.parse_args(argv)
    if ns.command == "ops":
        from dynexpr import ops

        print(ops.listing())
        return 0
    if ns.command == "cache":
        return artifacts_cli.run(ns, _load, _split_args)
    if ns.command == "precompile":
        from dynexpr.artifacts import bundle, manifest

        try:
            return precompile.run(ns.manifest, ns.output, ns.jobs,
                                  [s.strip() for s in ns.isa.split(",") if s.strip()])
        except (manifest.ManifestError, ValueError, bundle.BundleError) as e:
            raise SystemExit(str(e)) from None
    import dynexpr

    fn = _load(ns.function, "the function")
    make = _load(ns.args_from, "--args-from")
    if not callable(make):
        raise SystemExit(f"dynexpr: --args-from {ns.args_from} is not callable")
    args, kwargs = _split_args(make())
    print(dynexpr.explain(fn, *args, **kwargs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
