"""`grade review candidate|similar|export|delete|retention|purge`: interviewer review from the shell, on the same
store as `grade serve` (--data-dir / --db)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.service import _fail, _open, store_options
from harness.core.errors import EXIT_USAGE

ACTOR = "cli"


@click.group("review", short_help="Review candidates: attempts, similarity, export, delete.")
def review_cmd():
    """Interviewer review: what the review pages show, and the retention operations."""


@review_cmd.command("candidate")
@store_options
@click.argument("candidate_id")
def review_candidate(data_dir, db, candidate_id):
    """Each exercise's attempts (verdict, score, diagnosis), best, last and time to the first pass."""
    from harness.service import review
    from harness.service.store import candidates

    store = _open(data_dir, db)
    c = candidates.get(store, candidate_id)
    if c is None:
        _fail(f"no candidate {candidate_id!r}", EXIT_USAGE)
    click.echo(f"{c['display_name']} ({c['id']})")
    for g in review.candidate_story(store, candidate_id):
        s = g["summary"]
        click.echo(f"  {g['exercise']} (round {g['round_id'] or '-'}): {s['attempts']} attempt(s), best {s['best']}, "
                   f"last {s['last']}, " + (f"passed after {s['seconds_to_pass']:.0f} s" if s["passed"]
                                            else "not passed"))
        for a in g["attempts"]:
            click.echo(f"    #{a['attempt']} {a['received_at']} {a['verdict'] or a['status']} {a['final_score']} "
                       f"{', '.join(a['diagnosis'])}  {a['id']}")


@review_cmd.command("similar")
@store_options
@click.argument("round_id")
@click.option("--threshold", type=click.FloatRange(0, 1), help="Default: the round's, else 0.7.")
def review_similar(data_dir, db, round_id, threshold):
    """Pairs of submissions by two candidates that are alike (a signal for a person, never a verdict)."""
    from harness.service import similarity
    from harness.service.store import review as store_review

    store = _open(data_dir, db)
    limit = threshold if threshold is not None else (
        store_review.settings_of(store, round_id)["similarity_threshold"] or similarity.THRESHOLD)
    for p in similarity.pairs(store.list_submissions(round_id=round_id, limit=1000), threshold=limit):
        click.echo(f"{p.score:.2f}{' identical' if p.identical else ''}\t{p.a['exercise']}\t"
                   f"{p.a['candidate']} {p.a['id']}\t{p.b['candidate']} {p.b['id']}")


@review_cmd.command("export")
@store_options
@click.argument("candidate_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def review_export(data_dir, db, candidate_id, out):
    """One candidate's data as a zip (candidate.json, sources, reports)."""
    from harness.service import review

    data = review.export_zip(_open(data_dir, db), candidate_id)
    if data is None:
        _fail(f"no candidate {candidate_id!r}", EXIT_USAGE)
    out.write_bytes(data)
    click.echo(str(out))


@review_cmd.command("delete")
@store_options
@click.argument("candidate_id")
@click.option("--yes", is_flag=True, help="Really delete (nothing can bring it back).")
def review_delete(data_dir, db, candidate_id, yes):
    """Delete a candidate and everything of theirs (an audit entry records the deletion, naming no one)."""
    from harness.service.store import review

    if not yes:
        _fail("add --yes to delete the candidate and all their data", EXIT_USAGE)
    counts = review.delete_candidate(_open(data_dir, db), candidate_id, by=ACTOR)
    if counts is None:
        _fail(f"no candidate {candidate_id!r}", EXIT_USAGE)
    click.echo(f"deleted {counts['submissions']} submission(s), {counts['tokens']} token(s)")


@review_cmd.command("retention")
@store_options
@click.argument("round_id")
@click.argument("days", type=click.IntRange(0, 36500))
def review_retention(data_dir, db, round_id, days):
    """Purge the round's data DAYS after it closes (the service does it by itself)."""
    from harness.service.store import review, rounds

    store = _open(data_dir, db)
    if rounds.get(store, round_id) is None:
        _fail(f"no round {round_id!r}", EXIT_USAGE)
    review.set_settings(store, round_id, by=ACTOR, retention_days=days)
    click.echo(f"round {round_id}: purged {days} day(s) after it closes")


@review_cmd.command("purge")
@store_options
def review_purge(data_dir, db):
    """Purge now the rounds whose retention period ended."""
    from harness.service.store import review

    done = review.purge_expired(_open(data_dir, db))
    click.echo(f"purged {len(done)} round(s)")
