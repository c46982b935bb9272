"""Interviewer review in the store (issue 25), on SQLite and Postgres: report versions, rubric scores and
overrides audited with before and after, deleting a candidate leaves nothing of theirs in any table (nor, on
SQLite, in any file of the data directory), and a round past its retention period is purged by the service's
purge."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from harness.service.store import candidates, review, rounds
from harness.service.store.repository import Store, now
from tests.service.support import FreshPostgres, postgres_url_or_skip

MARK = "zq-unique-marker-7f3a"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = Store(f"sqlite:///{tmp_path / 'data' / 'grader.db'}")
        s.data_dir = tmp_path / "data"
        s.migrate()
        yield s
        s.dispose()
    else:
        pg = FreshPostgres(postgres_url_or_skip())
        s = Store(pg.url)
        s.data_dir = None
        s.migrate()
        yield s
        s.dispose()
        pg.drop()


def _graded(store, cand, round_id, source, *, score=10.0, verdict="passed", bugs=()):
    row, _ = store.create_submission(exercise="mha", track_requested="numpy", track="numpy",
                                     candidate=cand["display_name"], filename="sol.py", seed=0, callback_url=None,
                                     source=source, token_id=None, idempotency_key=None, queue="interactive",
                                     candidate_id=cand["id"], round_id=round_id)
    claimed = store.claim(row["id"], "test", 60)
    report = {"exercise": "mha", "track": "numpy", "verdict": verdict, "score": score, "max_score": 10.0, "tests": [],
              "diagnosis": [{"bug": b, "summary": b, "hint": "", "evidence": {}} for b in bugs],
              "environment": {}, "submission": {"path": "sol.py"}, "timings": {}}   # what the CLI's views read
    store.finish(row["id"], claimed["lease"], report=report, npz=b"npz:" + source.encode(),
                 webhook=("http://127.0.0.1:9/hook", json.dumps({"candidate": cand["display_name"]})))
    return store.get(row["id"])


def _round(store, **kw):
    t = now()
    return rounds.create(store, name="R", exercises={"mha": ["numpy"]}, opens_at=t - dt.timedelta(days=30),
                         closes_at=kw.pop("closes_at", t + dt.timedelta(days=1)), time_limit_s=None,
                         max_attempts=None, feedback="full", feedback_after=None, created_by=None)


def _member(store, r, name):
    c = candidates.create(store, display_name=name, email=f"{name.lower().replace(' ', '.')}@example.org")
    with store.session() as s:
        rounds.add_member(s, r["id"], c["id"])
    return c


def _everything(store) -> str:
    """Every row of every table, as text."""
    out = []
    with store.engine.connect() as c:
        for table in inspect(c).get_table_names():
            for row in c.execute(text(f'SELECT * FROM "{table}"')):
                out.append(f"{table}: " + " | ".join(
                    x.hex() if isinstance(x, (bytes, memoryview)) and not isinstance(x, str) else str(x)
                    for x in (bytes(v) if isinstance(v, memoryview) else v for v in row)))
    return "\n".join(out)


def test_versions_rubric_override_and_notes_are_audited(store):
    r = _round(store)
    ada = _member(store, r, "Ada")
    sub = _graded(store, ada, r["id"], "def mha(): pass\n", score=6.0, verdict="failed")
    assert review.keep_version(store, sub["id"], by="ivy (token:1)", reason="new suite") == 1
    store.regrade(sub["id"])
    claimed = store.claim(sub["id"], "t", 60)
    store.finish(sub["id"], claimed["lease"], report={"verdict": "passed", "score": 10.0, "max_score": 10.0,
                                                         "tests": []}, npz=None, webhook=None)
    (v1,) = review.versions(store, sub["id"])
    assert (v1["version"], v1["verdict"], v1["score"], v1["reason"]) == (1, "failed", 6.0, "new suite")
    assert json.loads(review.version(store, sub["id"], 1)["report_json"])["score"] == 6.0
    assert store.get(sub["id"])["score"] == 10.0           # the list and exports read the latest
    sub = store.get(sub["id"])
    review.set_criteria(store, r["id"], [{"name": "Correctness", "max_points": 60, "from_grade": True},
                                         {"name": "Clarity", "max_points": 40, "description": "names"}], by="ivy")
    rub = {c["name"]: c for c in review.rubric_for(store, sub)}
    assert rub["Correctness"]["points"] == 60 and rub["Correctness"]["prefilled"] and rub["Clarity"]["points"] is None
    review.score_criterion(store, sub, rub["Clarity"]["id"], 25, by="ivy")
    review.score_criterion(store, sub, rub["Clarity"]["id"], 30, by="olga")
    with pytest.raises(ValueError):
        review.score_criterion(store, sub, rub["Clarity"]["id"], 41, by="ivy")
    with pytest.raises(ValueError):
        review.set_override(store, sub, 7.0, "  ", by="ivy")
    review.set_override(store, sub, 7.5, "copied the einsum from a blog", by="olga")
    review.add_note(store, body="strong on masking", by="ivy", candidate_id=ada["id"], submission=sub)
    trail = review.audit_trail(store, candidate_id=ada["id"])
    scored = [e for e in trail if e["action"] == "rubric.scored"]
    assert [(e["actor"], e["before"]["points"], e["after"]["points"]) for e in scored] == [
        ("olga", 25, 30), ("ivy", None, 25)]
    (ovr,) = [e for e in trail if e["action"] == "score.overridden"]
    assert ovr["before"] == {"score": 10.0, "overridden": False} and ovr["after"]["score"] == 7.5
    assert {e["action"] for e in trail} >= {"report.regraded", "note.added"}
    (att,) = review.attempts_of(store, ada["id"])
    assert review.final_score(att) == 7.5 and review.summarise([att])["best"] == 7.5


def test_deleting_a_candidate_leaves_nothing_of_theirs(store):
    r = _round(store)
    ada, dee = _member(store, r, "Ada Keep"), _member(store, r, "Dee Gone" + MARK)
    store.create_token(role="candidate", name="dee-token", candidate="Dee Gone" + MARK, candidate_id=dee["id"])
    kept = _graded(store, ada, r["id"], "# ada's own\n")
    gone = [_graded(store, dee, r["id"], f"# {MARK} attempt {i}\n", bugs=["scale_sqrt_d"]) for i in range(2)]
    review.keep_version(store, gone[0]["id"], by="ivy", reason="because")
    review.set_criteria(store, r["id"], [{"name": "Correctness", "max_points": 10, "from_grade": True}], by="ivy")
    crit = review.criteria(store, r["id"])[0]
    review.score_criterion(store, gone[1], crit["id"], 3, by="ivy")
    review.set_override(store, gone[1], 1.0, f"note about {MARK}", by="ivy")
    review.add_note(store, body=f"{MARK} on the candidate", by="ivy", candidate_id=dee["id"])
    review.add_note(store, body=f"{MARK} on an attempt", by="ivy", candidate_id=dee["id"], submission=gone[0])
    secrets_of_dee = [dee["id"], MARK, *(g["id"] for g in gone), *(g["sha256"] for g in gone)]
    before = _everything(store)
    assert all(x in before for x in secrets_of_dee)
    counts = review.delete_candidate(store, dee["id"], by="ivy (token:1)")
    assert counts["submissions"] == 2 and counts["candidates"] == 1
    after = _everything(store)
    assert [x for x in secrets_of_dee if x in after] == []
    assert kept["id"] in after and "Ada Keep" in after
    (entry,) = [e for e in review.audit_trail(store) if e["action"] == "candidate.deleted"]
    assert entry["actor"] == "ivy (token:1)" and entry["candidate_id"] is None and entry["after"]["submissions"] == 2
    if store.data_dir is not None:     # SQLite: no file of the data directory holds any of it
        found = [(p.name, x) for p in Path(store.data_dir).rglob("*") if p.is_file()
                 for x in secrets_of_dee if x.encode() in p.read_bytes()]
        assert found == []
    assert review.delete_candidate(store, dee["id"], by="ivy") is None


def test_a_round_past_its_retention_period_is_purged(store):
    old = _round(store, closes_at=now() - dt.timedelta(days=10))
    fresh = _round(store)
    only_old, both = _member(store, old, "Olive"), _member(store, old, "Bea")
    with store.session() as s:
        rounds.add_member(s, fresh["id"], both["id"])
    a = _graded(store, only_old, old["id"], "# olive\n")
    b_old = _graded(store, both, old["id"], "# bea old\n")
    b_new = _graded(store, both, fresh["id"], "# bea new\n")
    review.set_settings(store, old["id"], by="ivy", retention_days=30)
    assert review.purge_expired(store) == []                     # 10 days after closing: kept
    review.set_settings(store, old["id"], by="ivy", retention_days=7)
    (summary,) = review.purge_expired(store)
    assert summary == {"submissions": 2, "candidates_deleted": 1, "retention_days": 7}
    assert store.get(a["id"]) is None and store.get(b_old["id"]) is None and store.get(b_new["id"]) is not None
    assert rounds.get(store, old["id"]) is None and candidates.get(store, only_old["id"]) is None
    assert candidates.get(store, both["id"]) is not None         # still in another round
    assert "Olive" not in _everything(store)
    assert review.purge_expired(store) == []


def test_the_cli_reads_exports_sets_retention_and_deletes(tmp_path):
    import zipfile

    from click.testing import CliRunner

    from harness.cli.main import main

    store = Store(f"sqlite:///{tmp_path / 'data' / 'grader.db'}")    # the CLI's --data-dir store
    store.data_dir = tmp_path / "data"
    store.migrate()
    r = _round(store)
    ada = _member(store, r, "Ada")
    _graded(store, ada, r["id"], "# first\n", score=4.0, verdict="failed", bugs=["scale_sqrt_d"])
    _graded(store, ada, r["id"], "# second\n")
    run = lambda *a: CliRunner().invoke(main, [*a, "--data-dir", str(store.data_dir)])  # noqa: E731
    out = run("review", "candidate", ada["id"])
    assert out.exit_code == 0, out.output
    assert "2 attempt(s), best 10.0, last 10.0, passed after" in out.output and "scale_sqrt_d" in out.output
    res = run("review", "export", ada["id"], "--out", str(tmp_path / "ada.zip"))
    assert res.exit_code == 0, res.output
    assert len([n for n in zipfile.ZipFile(tmp_path / "ada.zip").namelist() if n.startswith("sources/")]) == 2
    assert run("review", "retention", r["id"], "30").exit_code == 0
    assert review.settings_of(store, r["id"])["retention_days"] == 30
    assert run("review", "delete", ada["id"]).exit_code == 2          # no --yes: nothing happens
    assert candidates.get(store, ada["id"]) is not None
    res = run("review", "delete", ada["id"], "--yes")
    assert res.exit_code == 0 and "deleted 2 submission(s)" in res.output
    assert candidates.get(store, ada["id"]) is None
