"""`grade rounds create|invite|list|close`: run a hiring round from the shell, on the same store as `grade
serve` (--data-dir / --db). Invitation links are printed (and written to --out as CSV) once: the store keeps
only their hashes."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.service import _fail, _open, store_note, store_options
from harness.core.errors import EXIT_USAGE, UsageError


@click.group("rounds", short_help="Create hiring rounds, invite candidates, list and close rounds.")
def rounds_cmd():
    """Hiring rounds: the exercises a group of candidates may submit, a window, limits and a feedback policy;
    candidates join through single-use invitation links."""


@rounds_cmd.command("create")
@store_options
@click.option("--name", required=True)
@click.option("--exercise", "exercises", multiple=True, required=True,
              help="An exercise (repeat for more); name:track to allow one track only (mha:numpy).")
@click.option("--opens", default="now", show_default=True, help="now, a duration from now (1h) or an ISO time.")
@click.option("--closes", required=True, help="A duration from the opening (2h, 3d) or an ISO time.")
@click.option("--time-limit", help="Per candidate, from their first open (45m); default none.")
@click.option("--max-attempts", type=click.IntRange(1, 1000), help="Per exercise; default no limit.")
@click.option("--feedback", type=click.Choice(["full", "summary", "after_close"]), default="full", show_default=True)
@click.option("--feedback-after", type=click.Choice(["full", "summary"]), default="full", show_default=True,
              help="With --feedback after_close: what candidates read once the round closes.")
def rounds_create(data_dir, db, name, exercises, opens, closes, time_limit, max_attempts, feedback, feedback_after):
    """Create a round and print its id."""
    from harness.service.api.rounds import RoundCreate, new_round, round_view

    store = _open(data_dir, db)
    try:
        r = new_round(store, RoundCreate(name=name, exercises=list(exercises), opens_at=opens, closes_at=closes,
                                         time_limit=time_limit, max_attempts=max_attempts, feedback=feedback,
                                         feedback_after=feedback_after), None)
    except UsageError as exc:
        _fail(exc.message, EXIT_USAGE)
    v = round_view(r)
    click.echo(r["id"])
    click.echo(f"round {r['id']} {name!r}: {', '.join(v['exercises'])}; {v['opens_at']} → {v['closes_at']}; "
               f"feedback {feedback} ({store_note(data_dir, db)})", err=True)


@rounds_cmd.command("invite")
@store_options
@click.argument("round_id")
@click.option("--name", "names", multiple=True, help="A candidate's display name (repeat for more).")
@click.option("--email", "emails", multiple=True, help="Their e-mail, in the order of --name.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A CSV with a header row: name,email,external_ref (bulk).")
@click.option("--expires", help="The links' lifetime (48h) or an ISO time; default: when the round closes.")
@click.option("--base-url", envvar="GRADER_PUBLIC_URL", default="http://127.0.0.1:8000", show_default=True,
              help="The server's address as candidates reach it (env GRADER_PUBLIC_URL).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the links as CSV here.")
def rounds_invite(data_dir, db, round_id, names, emails, csv_path, expires, base_url, out):
    """Invite candidates to ROUND_ID: one single-use sign-in link each, printed once (name<TAB>link)."""
    from harness.service.api.rounds import invite_people, links_csv, people_from_csv
    from harness.service.store import rounds as store_rounds

    store = _open(data_dir, db)
    r = store_rounds.get(store, round_id)
    if r is None:
        _fail(f"no round {round_id!r} (grade rounds list)", EXIT_USAGE)
    try:
        people = [{"display_name": n, "email": emails[i] if i < len(emails) else None} for i, n in enumerate(names)]
        if csv_path:
            people += people_from_csv(csv_path.read_text(encoding="utf-8"))
        if not people:
            raise UsageError("name someone: --name NAME [--email E] or --csv FILE")
        views = invite_people(store, r, people, expires, created_by=None, base_url=base_url)
    except (UsageError, OSError) as exc:
        _fail(getattr(exc, "message", None) or str(exc), EXIT_USAGE)
    for v in views:
        click.echo(f"{v['display_name']}\t{v['link']}")
    if out:
        out.write_bytes(links_csv(views).body)
        out.chmod(0o600)
    click.echo(f"{len(views)} invitation(s) to {r['name']!r}, expiring {views[0]['expires_at']} "
               f"({store_note(data_dir, db)})" + (f"; links written to {out}" if out else ""), err=True)


@rounds_cmd.command("list")
@store_options
def rounds_list(data_dir, db):
    """List rounds (with a header)."""
    from harness.service.api.rounds import round_view
    from harness.service.store import rounds as store_rounds

    click.echo(f"{'ID':22} {'NAME':24} {'STATE':9} {'OPENS':20} {'CLOSES':20} {'CANDIDATES':>10}  EXERCISES")
    for r in store_rounds.list_all(_open(data_dir, db)):
        v = round_view(r)
        click.echo(f"{v['id']:22} {v['name'][:24]:24} {v['state']:9} {v['opens_at'][:19]:20} {v['closes_at'][:19]:20} "
                   f"{v['candidates']:>10}  {','.join(v['exercises'])}")


@rounds_cmd.command("close")
@store_options
@click.argument("round_id")
def rounds_close(data_dir, db, round_id):
    """Close ROUND_ID now: later submissions are refused; after_close feedback is released."""
    from harness.service.store import rounds as store_rounds

    r = store_rounds.close(_open(data_dir, db), round_id)
    if r is None:
        _fail(f"no round {round_id!r} (grade rounds list)", EXIT_USAGE)
    click.echo(f"closed round {round_id} ({r['name']!r}) at {r['ends_at']:%Y-%m-%d %H:%M} UTC")
