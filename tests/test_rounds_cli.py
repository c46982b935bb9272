"""`grade rounds create|invite|list|close` and `grade tokens` on a store in tmp_path (in-process, fast): the
commands say which store they wrote to, lists have a header, invitation links are printed and written once (the
store holds only their hashes), the last admin token stays, and --expires takes the API's forms."""

from __future__ import annotations

import csv
import sqlite3

from click.testing import CliRunner

from harness.cli.main import main
from harness.service.store.repository import hash_token


def run(*args, ok=True):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert (r.exit_code == 0) == ok, (args, r.exit_code, r.output, r.stderr)
    return r


def test_a_round_from_the_shell(tmp_path):
    d = ("--data-dir", tmp_path)
    r = run("rounds", "create", *d, "--name", "Backend", "--exercise", "mha", "--exercise", "kv_cache:numpy",
            "--closes", "2h", "--time-limit", "45m", "--max-attempts", "3", "--feedback", "summary")
    rid = r.stdout.strip()
    assert rid.startswith("round_") and f"store: SQLite {tmp_path / 'grader.db'}" in r.stderr
    (tmp_path / "people.csv").write_text("name,email,external_ref\nAda Lovelace,ada@example.org,ATS-1\n"
                                         "Ada Lovelace,,ATS-2\n")
    r = run("rounds", "invite", rid, *d, "--name", "Grace", "--csv", tmp_path / "people.csv", "--out",
            tmp_path / "links.csv", "--base-url", "https://grader.example")
    lines = r.stdout.splitlines()
    assert [ln.split("\t")[0] for ln in lines] == ["Grace", "Ada Lovelace", "Ada Lovelace"]
    codes = [ln.split("code=")[1] for ln in lines]
    assert all(ln.split("\t")[1].startswith("https://grader.example/join?code=gi_") for ln in lines)
    rows = list(csv.DictReader((tmp_path / "links.csv").read_text().splitlines()))
    assert [x["external_ref"] for x in rows] == ["", "ATS-1", "ATS-2"] and rows[1]["candidate_id"] != rows[2]["candidate_id"]
    con = sqlite3.connect(tmp_path / "grader.db")
    stored = {h for (h,) in con.execute("SELECT secret_hash FROM invitations")}
    dump = "\n".join(con.iterdump())
    con.close()
    assert stored == {hash_token(c) for c in codes} and not any(c in dump for c in codes)
    r = run("rounds", "list", *d)
    header, row = r.stdout.splitlines()
    assert header.split()[:3] == ["ID", "NAME", "STATE"] and rid in row and "open" in row and " 3 " in row
    run("rounds", "close", rid, *d)
    assert "closed" in run("rounds", "list", *d).stdout
    r = run("rounds", "invite", rid, *d, "--name", "Late", ok=False)
    assert r.exit_code == 2 and "is closed" in r.stderr
    r = run("rounds", "create", *d, "--name", "x", "--exercise", "mhaa", "--closes", "2h", ok=False)
    assert "unknown exercise 'mhaa'" in r.stderr and "mha" in r.stderr
    r = run("rounds", "create", *d, "--name", "x", "--exercise", "attention_cost:numpy", "--closes", "2h", ok=False)
    assert "attention_cost has no track 'numpy' (python)" in r.stderr


def test_tokens_say_where_and_list_with_a_header(tmp_path):
    d = ("--data-dir", tmp_path)
    r = run("tokens", "create", *d, "--role", "admin", "--name", "ops", "--expires", "12h")
    assert f"store: SQLite {tmp_path / 'grader.db'}" in r.stderr and "expires" in r.stderr
    r = run("tokens", "list", *d)
    assert r.stdout.splitlines()[0].split() == ["ID", "ROLE", "NAME", "CANDIDATE", "PREFIX", "STATE"]
    assert "store: SQLite" in r.stderr
    r = run("tokens", "revoke", "1", *d, ok=False)
    assert "last active admin" in r.stderr
    r = run("tokens", "create", *d, "--role", "admin", "--name", "x", "--expires", "soon", ok=False)
    assert "30d, 12h, 90m" in r.stderr
    # a second token for the same candidate record, not a new candidate of the same name
    r = run("tokens", "create", *d, "--role", "candidate", "--name", "Ada")
    cid = r.stderr.split("(cand_")[1].split(")")[0]
    r = run("tokens", "create", *d, "--role", "candidate", "--name", "Ada", "--candidate-id", "cand_" + cid)
    assert f"(cand_{cid})" in r.stderr
    assert run("tokens", "list", *d).stdout.count("cand_" + cid) == 2
    r = run("tokens", "create", *d, "--role", "candidate", "--name", "Ada", "--candidate-id", "cand_nope", ok=False)
    assert "no candidate 'cand_nope'" in r.stderr
