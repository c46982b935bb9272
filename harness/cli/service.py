"""CLI commands of the service: `grade serve`, `grade tokens ...`, `grade worker`, `grade reconcile` (`grade
submit` is harness/cli/kit.py, over the candidate kit's client). Registered in
harness/cli/main.py. Every command that touches the store takes --data-dir / --db (GRADER_DATA_DIR /
GRADER_DATABASE_URL)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.common import runtime_note, runtime_option
from harness.core.errors import EXIT_USAGE
from harness.service.settings import BROKER_URL_ENV, DATA_DIR_ENV, DATABASE_URL_ENV, Settings


def _fail(message: str, code: int):
    click.echo(f"grade: error: {message}", err=True)
    sys.exit(code)


def store_options(f):
    f = click.option("--db", "db", envvar=DATABASE_URL_ENV, metavar="URL",
                     help="Database URL (sqlite:///... or postgresql://...; env GRADER_DATABASE_URL). "
                          "Default: SQLite in the data directory.")(f)
    f = click.option("--data-dir", "data_dir", envvar=DATA_DIR_ENV, type=click.Path(file_okay=False, path_type=Path),
                     help="Where the SQLite store and work files live (env GRADER_DATA_DIR; default "
                          "~/.local/share/attention-grader).")(f)
    return f


@click.command("serve", short_help="Run the grading service (HTTP API, pages, workers).")
@store_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Grading processes (default 2; env GRADER_WORKERS).")
@click.option("--sandbox", type=click.Choice(["auto", "local", "docker"]), default=None, envvar="GRADER_SANDBOX",
              help="Where submissions run (env GRADER_SANDBOX; default auto).")
@runtime_option
@click.option("--broker", "broker", envvar=BROKER_URL_ENV, metavar="URL",
              help="Grade in `grade worker` processes through this broker (redis://HOST:PORT/DB; env "
                   "GRADER_BROKER_URL) instead of in-process workers. Needs a shared store (--db postgresql://...).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def serve_cmd(data_dir, db, host, port, workers, sandbox, broker, log_level):
    """Run the grading service: the HTTP API and pages, the store, and grading — in-process workers, or
    `grade worker` processes on other hosts with --broker."""
    from harness.service.queue.broker import redact
    from harness.service.server import CannotListen, DataDirLocked, serve

    settings = Settings.resolve(data_dir, db, host=host, port=port, workers=workers, sandbox=sandbox,
                                broker_url=broker)
    if settings.broker_url and settings.is_sqlite:
        _fail("--broker needs a store the workers can reach: --db postgresql://... (GRADER_DATABASE_URL)", EXIT_USAGE)

    def announce(store, bound_port):   # once the data dir and the port are ours: never a URL that is not served
        click.echo(f"grade serve: data directory {settings.data_dir}", err=True)
        grading_by = (f"grading by `grade worker` processes through {redact(settings.broker_url)}"
                      if settings.broker_url else
                      f"{settings.workers} grading workers, sandbox {settings.sandbox}{runtime_note()}")
        where = "SQLite (WAL) " + str(settings.data_dir / "grader.db") if settings.is_sqlite else "Postgres"
        click.echo(f"grade serve: store {where}; {grading_by}", err=True)
        click.echo(f"grade serve: http://{host}:{bound_port}/  (pages; API docs at /docs)", err=True)
        if store.count_tokens() == 0:
            click.echo("grade serve: no tokens yet: grade tokens create --role admin --name YOU"
                       + (f" --data-dir {settings.data_dir}" if data_dir else ""), err=True)

    try:
        serve(settings, log_level=log_level, announce=announce)
    except (DataDirLocked, CannotListen) as exc:
        _fail(str(exc), EXIT_USAGE)


@click.group("tokens", short_help="Create, list and revoke the service's access tokens.")
def tokens_cmd():
    """Create, list and revoke API tokens (stored hashed)."""


def _parse_expiry(value: str | None):
    """The same forms as POST /v1/tokens' "expires": 30d, 12h, 90m, 45s or an ISO time."""
    from harness.core.errors import UsageError
    from harness.service.durations import parse_time

    if not value:
        return None
    try:
        return parse_time(value, "--expires")
    except UsageError as exc:
        _fail(exc.message, EXIT_USAGE)


def store_note(data_dir, db) -> str:
    """Which store a command wrote to: the SQLite file, or the Postgres server and database (no password)."""
    s = Settings.resolve(data_dir, db)
    if s.is_sqlite:
        return f"store: SQLite {s.database_url.split('///', 1)[-1]}"
    from sqlalchemy.engine import make_url

    u = make_url(s.database_url)
    return f"store: Postgres {u.host or 'localhost'}{':' + str(u.port) if u.port else ''}/{u.database}"


def _open(data_dir, db):
    from harness.service.server import open_store

    return open_store(Settings.resolve(data_dir, db))


@tokens_cmd.command("create")
@store_options
@click.option("--role", type=click.Choice(["admin", "interviewer", "candidate"]), required=True)
@click.option("--name", required=True, help="Who holds it (for a candidate: the candidate's name).")
@click.option("--candidate", help="Role candidate: the display name of a new candidate record (default: --name).")
@click.option("--candidate-id", help="Role candidate: an existing candidate (cand_...) instead of a new one.")
@click.option("--expires", help="Lifetime (30d, 12h, 90m, 45s) or an ISO date; default never.")
def tokens_create(data_dir, db, role, name, candidate, candidate_id, expires):
    """Create a token and print its secret (shown once)."""
    store = _open(data_dir, db)
    if candidate_id and role != "candidate":
        _fail("--candidate-id is for --role candidate", EXIT_USAGE)
    try:
        secret, row = store.create_token(role=role, name=name, candidate=candidate, candidate_id=candidate_id,
                                         expires_at=_parse_expiry(expires))
    except ValueError as exc:
        _fail(str(exc), EXIT_USAGE)
    click.echo(secret)
    click.echo(f"token {row['id']}: role {role}, name {name!r}"
               + (f", candidate {row['candidate']!r} ({row['candidate_id']})" if row["candidate"] else "")
               + (f", expires {row['expires_at']:%Y-%m-%d %H:%M} UTC" if row["expires_at"] else "")
               + f" ({store_note(data_dir, db)})", err=True)


@tokens_cmd.command("list")
@store_options
def tokens_list(data_dir, db):
    """List tokens (never their secrets), with a header."""
    click.echo(store_note(data_dir, db), err=True)
    click.echo(f"{'ID':>4}  {'ROLE':11} {'NAME':24} {'CANDIDATE':22} {'PREFIX':11}  STATE")
    for t in _open(data_dir, db).list_tokens():
        state = "revoked" if t["revoked_at"] else ("expires " + f"{t['expires_at']:%Y-%m-%d %H:%M}" if t["expires_at"]
                                                   else "active")
        click.echo(f"{t['id']:>4}  {t['role']:11} {t['name'][:24]:24} {t.get('candidate_id') or '-':22} "
                   f"{t['prefix']}…  {state}")


@tokens_cmd.command("revoke")
@store_options
@click.argument("token_id", type=int)
def tokens_revoke(data_dir, db, token_id):
    """Revoke token TOKEN_ID (see `grade tokens list`) and end its sessions; never the last admin token."""
    from harness.service.store import staff

    try:
        if not staff.revoke(_open(data_dir, db), token_id):
            _fail(f"no active token {token_id}", EXIT_USAGE)
    except staff.LastAdmin as exc:
        _fail(str(exc), EXIT_USAGE)
    click.echo(f"revoked token {token_id} ({store_note(data_dir, db)})")


@tokens_cmd.command("webhook-secret")
@store_options
def tokens_webhook_secret(data_dir, db):
    """Print the secret webhooks are signed with (HMAC-SHA256)."""
    from harness.service.keys import server_key

    click.echo(server_key(Settings.resolve(data_dir, db).data_dir, "webhook"))


# -- grade worker / grade reconcile ------------------------------------------------------------------------
@click.command("worker", short_help="Grade from the queue on this host (many hosts).")
@store_options
@click.option("--broker", "broker", envvar=BROKER_URL_ENV, metavar="URL", required=True,
              help="The broker, redis://HOST:PORT/DB (env GRADER_BROKER_URL).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=None,
              help="Submissions graded at once (default: the CPU count; env GRADER_WORKERS is not used).")
@click.option("--queues", default="interactive,bulk,ci", show_default=True,
              help="Comma-separated queues to take work from (interactive before bulk before ci).")
@click.option("--sandbox", type=click.Choice(["auto", "local", "docker"]), default=None, envvar="GRADER_SANDBOX",
              help="Where submissions run on this host (env GRADER_SANDBOX; default auto).")
@runtime_option
@click.option("--grace", type=float, default=600.0, show_default=True,
              help="On SIGTERM, seconds to let running gradings finish before leaving.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def worker_cmd(data_dir, db, broker, concurrency, queues, sandbox, grace, log_level):
    """Grade submissions from the broker on this host and write reports to the shared store (one per Docker
    host; scale with --concurrency, about one per core)."""
    import logging
    import os

    from harness.service.queue.broker import QUEUES, redact
    from harness.service.queue.host import run_worker

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    wanted = tuple(q.strip() for q in queues.split(",") if q.strip())
    unknown = [q for q in wanted if q not in QUEUES]
    if not wanted or unknown:
        _fail(f"--queues: unknown queue {', '.join(unknown) or '(none)'}; choose from {', '.join(QUEUES)}", EXIT_USAGE)
    settings = Settings.resolve(data_dir, db, sandbox=sandbox, broker_url=broker)
    if settings.is_sqlite:
        click.echo("grade worker: warning: SQLite store; workers on other hosts need --db postgresql://...", err=True)
    n = concurrency or max(1, os.cpu_count() or 1)
    click.echo(f"grade worker: {n} at once from {redact(settings.broker_url)} (queues {','.join(wanted)}), "
               f"sandbox {settings.sandbox}{runtime_note()}", err=True)
    try:
        sys.exit(run_worker(settings, concurrency=n, queues=wanted, grace_s=grace))
    except ValueError as exc:
        _fail(str(exc), EXIT_USAGE)


@click.command("reconcile", short_help="Re-enqueue what the queue lost (one pass).")
@store_options
@click.option("--broker", "broker", envvar=BROKER_URL_ENV, metavar="URL", required=True,
              help="The broker, redis://HOST:PORT/DB (env GRADER_BROKER_URL).")
@click.option("--dry-run", is_flag=True, help="Only report what would be sent.")
def reconcile_cmd(data_dir, db, broker, dry_run):
    """Re-enqueue what the broker lost: submissions whose lease expired (their worker died) and queued ones the
    broker never got or no longer holds (a Redis restart). `grade serve` does this every few seconds; this is
    the operator's one-shot."""
    from harness.service.queue.actors import declare_actors
    from harness.service.queue.broker import Broker
    from harness.service.queue.engine import reconcile
    from harness.service.server import open_store

    settings = Settings.resolve(data_dir, db, broker_url=broker)
    store = open_store(settings)
    b = Broker(settings.broker_url, settings)
    actors = declare_actors(b, lambda: None)
    planned = []
    send = (lambda sub_id, queue: planned.append((sub_id, queue))) if dry_run else None
    try:
        if dry_run:
            out = {"expired": 0, "sent": 0, "lost": 0}
            for r in store.outbox(grace_s=settings.outbox_grace_s):
                held = b.holds(r["queue"], r["message_id"]) if r["enqueued_at"] is not None else False
                if not held:
                    planned.append((r["id"], r["queue"]))
            out["sent"] = len(planned)
        else:
            out = reconcile(store, b, actors, settings, send=send)
    finally:
        b.close()
        store.dispose()
    verb = "would send" if dry_run else "sent"
    click.echo(f"grade reconcile: {out['expired']} expired leases re-queued, {verb} {out['sent']} messages "
               f"({out['lost']} lost by the broker)")
    for sub_id, queue in planned:
        click.echo(f"  {sub_id} -> {queue}")
