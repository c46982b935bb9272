"""The `grade` console script and `python -m harness` start here: this process is the command. Nothing here
imports click (harness/cli/, the command line itself, is imported after this).

Before click is imported (~35 ms with the CLI's own modules) and the command line parsed, a one-shot grade's
worker is started from a plain reading of the command line (harness/grading/start.py ``start_early``): the host
waits for that worker in a torch grade (its `import torch`) and in a docker one (the container's start). The
reading here is only a guess at what `grade run` will be asked: click parses the command line as always, and the
grade adopts the early worker only when it asks for exactly what was guessed; otherwise it is closed unused.
"""

from __future__ import annotations

import os
import sys

SANDBOXES = ("auto", "local", "docker")
# `grade run`'s options that start the worker differently (a value each) or not at all (value or flag)
VALUED = ("--track", "--sandbox", "--timeout", "--memory-mb", "--json", "--seed")
FLAGS = ("-q", "--quiet")


def one_shot(argv: list[str], environ: dict) -> dict | None:
    """The arguments of ``start_early`` for a command line that reads plainly as `grade [run] EXERCISE FILE
    [options]`, or None (another command, help, --runtime, an option or value `grade run` would refuse...)."""
    from harness.core.exercises import TRACKS

    args = list(argv[1:] if argv[:1] == ["run"] else argv)
    positional, options = [], {}
    while args:
        arg = args.pop(0)
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in FLAGS and not eq:
            continue
        if name not in VALUED or name in options:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        options[name] = value
    if len(positional) != 2 or positional[0].startswith("-"):
        return None
    track = options.get("--track", "auto")
    sandbox = options.get("--sandbox", environ.get("GRADER_SANDBOX") or "auto")
    if track not in ("auto", *TRACKS) or sandbox not in SANDBOXES:
        return None
    try:
        int(options.get("--seed", "0"))
        timeout = float(options["--timeout"]) if "--timeout" in options else None
        memory_mb = int(options["--memory-mb"]) if "--memory-mb" in options else None
    except ValueError:
        return None
    return {"exercise": positional[0], "submission": positional[1], "track": track, "sandbox": sandbox,
            "limits": {"call_timeout_s": timeout, "memory_mb": memory_mb}}


def main() -> None:
    wanted = one_shot(sys.argv[1:], dict(os.environ))
    if wanted is not None:
        from harness.grading.start import start_early

        start_early(**wanted)
    from harness.cli.main import main as group

    group(prog_name="grade")
