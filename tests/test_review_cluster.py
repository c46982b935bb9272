"""Interviewer review over the API on Postgres with a `grade worker` grading through Redis (issue 25): a round,
two candidates, a regrade that keeps the earlier report as a version (graded again by the worker), rubric and
override with the audit trail, similarity and analytics, one candidate's export zip validated against the report
schema, and the other's deletion leaving nothing of theirs in any Postgres table."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlalchemy import create_engine, inspect, text

from harness.core.report import validate_report
from tests.service.nearcopy import near_copy
from tests.service.rounds import join, page_submit
from tests.service.support import FreshPostgres, Server, make_tokens, postgres_url_or_skip, wait_done
from tests.test_review_pages import RIGHT, WRONG

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from tests.parallel import redis_db
    from tests.service.cluster import NetHosts, WorkerProc, redis_url_or_skip

    tmp = tmp_path_factory.mktemp("reviewpg")
    pg = FreshPostgres(postgres_url_or_skip())
    broker = f"{redis_url_or_skip().rsplit('/', 1)[0]}/{redis_db(slot=2)}"   # this pytest process's own database
    __import__("redis").Redis.from_url(broker).flushdb()
    env = {"GRADER_DATABASE_URL": pg.url, "GRADER_BROKER_URL": broker}
    tokens = make_tokens(tmp / "data", ("interviewer", "ivy"), db=pg.url)
    srv = Server(tmp / "data", workers=2, env=env).start()
    srv.tokens, srv.pg = tokens, pg
    worker = WorkerProc(NetHosts(0), 0, broker=broker, db=pg.url, data_dir=tmp / "worker", concurrency=2).start()
    try:
        yield srv
    finally:
        srv.stop()
        worker.stop()
        pg.drop()
        __import__("redis").Redis.from_url(broker).flushdb()


def test_review_on_postgres_with_a_worker(cluster):
    ivy = cluster.client(cluster.tokens["ivy"])
    r = ivy.post("/v1/rounds", json={"name": "PG review", "exercises": ["mha"], "opens_at": "now",
                                     "closes_at": "2h", "feedback": "full"}).json()
    inv = ivy.post(f"/v1/rounds/{r['id']}/invitations",
                   json={"candidates": [{"display_name": "Pat"}, {"display_name": "Quinn Erasable"}]}).json()
    people = {i["display_name"]: (i["candidate_id"], join(cluster.url, i["link"])) for i in inv["invitations"]}
    subs = {}
    try:
        for who, src in (("Pat", WRONG), ("Pat", RIGHT), ("Quinn Erasable", near_copy(RIGHT) + "# quinn-mark\n")):
            resp = page_submit(people[who][1], "mha", src)
            assert resp.status_code == 303, resp.text
            subs.setdefault(who, []).append(resp.headers["location"].rsplit("/", 1)[1])
        for ids in subs.values():
            for s in ids:
                assert wait_done(ivy, s)["status"] == "done"
        pat, quinn = people["Pat"][0], people["Quinn Erasable"][0]
        story = ivy.get(f"/v1/review/candidates/{pat}").json()
        (g,) = story["exercises"]
        assert [a["verdict"] for a in g["attempts"]] == ["failed", "passed"] and g["summary"]["attempts"] == 2
        # a regrade, graded by the worker, keeps the earlier report
        s = subs["Pat"][0]
        assert ivy.post(f"/v1/submissions/{s}/regrade", params={"reason": "check"}).status_code == 202
        assert wait_done(ivy, s)["status"] == "done"
        v = ivy.get(f"/v1/review/submissions/{s}/versions").json()
        assert v["latest"] == 2 and v["versions"][0]["reason"] == "check"
        assert validate_report(ivy.get(f"/v1/review/submissions/{s}/versions/1").json())
        # rubric, override, audit
        assert ivy.put(f"/v1/review/rounds/{r['id']}/rubric", json={"criteria": [
            {"name": "Correctness", "max_points": 50, "from_grade": True}, {"name": "Style", "max_points": 10}]}
                       ).status_code == 200
        got = ivy.post(f"/v1/review/submissions/{subs['Pat'][1]}/rubric", json={"scores": {"Style": 8}}).json()
        assert {c["name"]: c["points"] for c in got["rubric"]} == {"Correctness": 50, "Style": 8}
        assert ivy.post(f"/v1/review/submissions/{subs['Pat'][1]}/rubric", json={"scores": {"Style": 11}}
                        ).status_code == 422
        assert ivy.post(f"/v1/review/submissions/{subs['Pat'][1]}/override", json={"score": 5, "reason": "r"}
                        ).status_code == 200
        trail = ivy.get(f"/v1/review/submissions/{subs['Pat'][1]}/audit").json()
        assert [e["action"] for e in trail][:2] == ["score.overridden", "rubric.scored"]
        assert people["Pat"][1].get(f"/v1/review/submissions/{subs['Pat'][1]}/audit").status_code == 403
        # similarity and analytics
        sim = ivy.get(f"/v1/review/rounds/{r['id']}/similarity").json()
        assert any({p["a"]["candidate_id"], p["b"]["candidate_id"]} == {pat, quinn} for p in sim["pairs"])
        (stats,) = ivy.get(f"/v1/review/rounds/{r['id']}/analytics").json()
        assert stats["candidates"] == 2 and stats["passed"] == 2 and dict(stats["bugs"])["scale_sqrt_d"] == 1
        # export one, delete the other
        z = zipfile.ZipFile(io.BytesIO(ivy.get(f"/v1/review/candidates/{pat}/export").content))
        reports = [n for n in z.namelist() if n.startswith("reports/")]
        assert len(reports) == 3 and all(validate_report(json.loads(z.read(n))) for n in reports)
        assert ivy.delete(f"/v1/review/candidates/{quinn}").json()["deleted"]["submissions"] == 1
        theirs = [quinn, "Quinn Erasable", "quinn-mark", *subs["Quinn Erasable"]]
        eng = create_engine(cluster.pg.url)
        try:
            with eng.connect() as c:
                for table in inspect(c).get_table_names():
                    for row in c.execute(text(f'SELECT * FROM "{table}"')):
                        blob = " ".join(str(x) for x in row)
                        assert not [t for t in theirs if t in blob], (table, blob[:300])
        finally:
            eng.dispose()
    finally:
        for _, c in people.values():
            c.close()
