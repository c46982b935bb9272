"""`grade` as the candidate kit installs it: list, start, check, submit, login. Any other command (run, serve,
batch...) is the full package's: when `attention-grader` is installed in the same environment, it is handed
over to it, so one `grade` serves both whichever distribution wrote the script last (README: "Which package").

Imports only the standard library here; `grade check` starts NumPy in its child process only."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from .exercises import KitUsageError

DATA = Path(__file__).resolve().parent / "exercises"
KIT_COMMANDS = ("list", "start", "check", "submit", "login")
EXIT_USAGE, EXIT_INFRA = 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grade", description="The attention-grader candidate kit: write the "
                                "exercise, check it on the public vectors, submit it.",
                                epilog="Exit codes: 0 passed, 1 failed, 2 bad usage, 3 the service failed.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="the exercises and their tracks")
    s = sub.add_parser("start", help="write the stub to start from")
    s.add_argument("exercise")
    s.add_argument("path", nargs="?")
    s.add_argument("--track", help="default: the exercise's first track")
    s.add_argument("--force", action="store_true", help="overwrite PATH")
    c = sub.add_parser("check", help="run FILE on the exercise's public test vectors")
    c.add_argument("exercise")
    c.add_argument("file", type=Path)
    c.add_argument("--track", default="auto")
    c.add_argument("--timeout", type=float, default=60.0, help="seconds for all the vectors (default 60)")
    u = sub.add_parser("submit", help="submit FILE to the grading service")
    u.add_argument("file", type=Path)
    u.add_argument("--exercise", required=True)
    u.add_argument("--server", help="http://HOST:PORT or HOST:PORT (env GRADER_SERVER; default: grade login's)")
    u.add_argument("--token", help="bearer token (env GRADER_TOKEN; default: grade login's)")
    u.add_argument("--track", default="auto")
    u.add_argument("--seed", type=int)
    u.add_argument("--wait", action="store_true", help="wait for the verdict and print the summary")
    u.add_argument("--timeout", type=float, default=900.0)
    u.add_argument("--json", dest="json_path", type=Path, help="write the report the server returned")
    u.add_argument("-q", "--quiet", action="store_true")
    lg = sub.add_parser("login", help="save a token or an invitation link for grade submit")
    lg.add_argument("token_or_link")
    lg.add_argument("--server", help="http://HOST:PORT (env GRADER_SERVER); not needed with an invitation link")
    return p


def _list() -> int:
    from . import exercises

    for name in exercises.names(DATA):
        meta = exercises.load(DATA, name)
        print(f"{name:18} {', '.join(exercises.tracks_of(meta)):14} {meta.get('title', '')}")
    print(f"prompts: {DATA}/<exercise>/README.md")
    return 0


def _start(args) -> int:
    from . import exercises

    meta = exercises.load(DATA, args.exercise)
    tracks = exercises.tracks_of(meta)
    args.track = args.track or next(iter(tracks))
    if args.track not in tracks:
        raise KitUsageError(f"exercise {args.exercise!r} has no track {args.track!r}; choose {', '.join(tracks)}")
    target = Path(args.path or f"{args.exercise}_{args.track}.py")
    if target.exists() and not args.force:
        raise KitUsageError(f"{target} exists; pass --force to overwrite it")
    shutil.copyfile(DATA / args.exercise / f"stub_{args.track}.py", target)
    print(f"wrote {target}; the prompt: {DATA / args.exercise / 'README.md'}")
    print(f"check it: grade check {args.exercise} {target}")
    return 0


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "list":
        return _list()
    if args.command == "start":
        return _start(args)
    if args.command == "check":
        from .check import check

        return check(args.exercise, args.file, exercises_dir=DATA, track=args.track, timeout=args.timeout,
                     vectors_for=lambda exercise, track: DATA / exercise / "vectors" / track)
    if args.command == "submit":
        from .submit import submit

        return submit(args.file, exercise=args.exercise, server=args.server, token=args.token, track=args.track,
                      seed=args.seed, wait=args.wait, timeout=args.timeout, json_path=args.json_path,
                      quiet=args.quiet)
    from .server import login

    base, path = login(args.token_or_link, args.server)
    print(f"logged in to {base}; saved in {path}")
    return 0


def _full_package() -> bool:
    import importlib.util

    return importlib.util.find_spec("harness") is not None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    if argv and argv[0] == first and (DATA / str(first) / "exercise.json").is_file() and not _full_package():
        argv = ["check", *argv]        # `grade EXERCISE FILE` (the stubs' docstrings): in the kit, the check
        first = "check"
    if not DATA.is_dir() or (first is not None and first not in KIT_COMMANDS):
        try:
            from harness.cli import main as full   # the full package, when installed beside the kit
        except ImportError:
            full = None
        if full is not None:
            return full(argv)
        if first is not None:
            print(f"grade: error: {first!r} is not a command of the candidate kit ({', '.join(KIT_COMMANDS)}); "
                  f"the grader's own commands come with the full attention-grader package", file=sys.stderr)
            sys.exit(EXIT_USAGE)
    from .server import ServerUnreachable
    from .submit import ServiceFault

    try:
        code = run(argv)
    except KitUsageError as exc:
        print(f"grade: error: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    except (ServiceFault, ServerUnreachable) as exc:
        print(f"grade: error: {exc}", file=sys.stderr)
        code = EXIT_INFRA
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    sys.exit(code)
