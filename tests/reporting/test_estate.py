"""The estate: nights of several dashboards read from their summary.json, added up, rendered and delivered."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from email import message_from_bytes, policy
from pathlib import Path

from fleet.engine.estate import Estate, NightStatus, find_run_dir, read_night, tally_summary
from fleet.model.summary import Outcome, Summary, run_suffix
from reporting.estate import deliver_estate, render_estate
from reporting.run_report import render_reports
from reporting.settings import MailSettings, SmtpSecurity
from tests.reporting.builder import XSS, build_summary
from tests.reporting.conftest import SmtpServer

FLOW_RUNS = {"brand-a": "0b5e2c5d-1111-4a4a-9c9c-000000000001", "brand-b": "7f00aa12-2222-4b4b-9d9d-000000000002"}


def write_night(report_dir: Path, block: str, night: date, *, seed: int, newer: bool = False) -> Path:
    """A night as a dashboard's flow run writes it: REPORT_DIR/<block>/<stamp>-<run_suffix>/summary.json.
    `newer` records sites the night broke and a deferred site; without it the summary is as older nights wrote
    it, without either."""
    summary = build_summary(night, seed=seed, run_id=f"{night:%Y%m%d}-020000-{run_suffix(FLOW_RUNS[block])}")
    run_dir = report_dir / block / summary.run_id
    summary.write(run_dir)
    raw = json.loads((run_dir / "summary.json").read_text())
    if newer:
        raw["broken"] = [{"site_id": 1, "site_url": "https://acmedental.com"}, {"site_id": 2}]
        raw["sites"][0]["deferred"] = "outside its maintenance window (01:00-04:00 Europe/Berlin)"
    else:  # a summary written before nights recorded broken and deferred sites
        raw.pop("broken", None)
        for site in raw["sites"]:
            site.pop("deferred", None)
    (run_dir / "summary.json").write_text(json.dumps(raw))
    return run_dir


def estate_of(report_dir: Path) -> Estate:
    nights = [
        read_night("brand-a", status=NightStatus.completed, report_dir=report_dir / "brand-a",
                   flow_run_id=FLOW_RUNS["brand-a"], flow_run_name="witty-otter", state="Completed",
                   base_url="https://a.example/wp-json"),
        read_night("brand-b", status=NightStatus.failed, report_dir=report_dir / "brand-b",
                   flow_run_id=FLOW_RUNS["brand-b"], flow_run_name="calm-heron", state="Failed",
                   message=f"2 sites broken {XSS}", base_url="https://b.example/wp-json"),
        read_night("brand-c", status=NightStatus.unreachable, report_dir=report_dir / "brand-c",
                   message="GET /wp-json/svc/v2/sites: connection refused", base_url="https://c.example/wp-json"),
    ]
    return Estate(run_id="20261122-020000-abcdef12", started_at=datetime(2026, 11, 22, 2, tzinfo=UTC), nights=nights)


def test_tally_counts_what_the_summary_records(tmp_path: Path) -> None:
    run_dir = write_night(tmp_path, "brand-a", date(2026, 11, 21), seed=3)
    summary = build_summary(date(2026, 11, 21), seed=3)
    tally = tally_summary(json.loads((run_dir / "summary.json").read_text()))
    assert tally.sites == len(summary.sites) and tally.items == len(summary.items)
    assert tally.updated == sum(i.outcome is Outcome.updated for i in summary.items) > 0
    assert tally.failed == sum(i.outcome is Outcome.failed for i in summary.items) > 0
    assert tally.broken is None and tally.deferred is None, "not recorded by this summary: not invented as 0"

    older = json.loads((run_dir / "summary.json").read_text())
    del older["counts"]
    assert tally_summary(older).by_outcome == tally.by_outcome, "an older summary without counts: from the items"
    assert tally_summary({"items": "garbage", "sites": None}).items == 0


def test_find_run_dir_by_flow_run_id(tmp_path: Path) -> None:
    write_night(tmp_path, "brand-a", date(2026, 11, 20), seed=1)
    (tmp_path / "brand-a" / "20261121-020000-00000001-partial").mkdir()  # no summary.json
    found = find_run_dir(tmp_path / "brand-a", FLOW_RUNS["brand-a"])
    assert found is not None and found.name.endswith(run_suffix(FLOW_RUNS["brand-a"]))
    assert find_run_dir(tmp_path / "brand-a", FLOW_RUNS["brand-b"]) is None
    assert find_run_dir(tmp_path / "missing", FLOW_RUNS["brand-a"]) is None


def test_flow_runs_created_together_have_run_ids_of_their_own(tmp_path: Path) -> None:
    """Prefect's flow run ids are time-ordered: a scheduler's runs created together share their first 8 digits
    (the soak's 14 nights all ended in -01a216b9), so a run id ends in the random end of the id."""
    together = ["01a216b9-7c2e-7a01-8d3c-5b0e9f11aa01", "01a216b9-7c2e-7b77-9e21-0c4d2a33bb02"]
    assert len({run_suffix(flow_run_id) for flow_run_id in together}) == 2
    moment = datetime(2026, 11, 20, tzinfo=UTC)
    for number, flow_run_id in enumerate(together):
        run_id = f"2026112{number}-020000-{run_suffix(flow_run_id)}"
        Summary(run_id=run_id, started_at=moment, finished_at=moment).write(tmp_path / run_id)
    assert [find_run_dir(tmp_path, flow_run_id).name[:8] for flow_run_id in together] == ["20261120", "20261121"]


def test_estate_adds_up_and_names_every_problem(tmp_path: Path) -> None:
    write_night(tmp_path, "brand-a", date(2026, 11, 22), seed=1)
    write_night(tmp_path, "brand-b", date(2026, 11, 22), seed=2, newer=True)
    estate = estate_of(tmp_path)
    a, b, c = estate.nights
    assert a.tally and b.tally and c.tally is None
    totals = estate.totals
    assert totals.sites == a.tally.sites + b.tally.sites
    assert totals.updated == a.tally.updated + b.tally.updated and totals.failed == a.tally.failed + b.tally.failed
    assert b.tally.broken == 2 and b.tally.deferred == 1 and a.tally.broken is None
    assert totals.broken == 2 and totals.deferred == 1, "counted where recorded"
    assert not estate.ok and [p.split(":")[0] for p in estate.problems] == ["brand-b", "brand-c"]
    assert "connection refused" in estate.problems[1]

    assert Estate.read(estate.write(tmp_path / "estate")) == estate


def test_completed_run_without_summary_is_not_counted_as_completed(tmp_path: Path) -> None:
    night = read_night("brand-a", status=NightStatus.completed, report_dir=tmp_path / "brand-a",
                       flow_run_id=FLOW_RUNS["brand-a"])
    assert night.status is NightStatus.failed and "no summary.json" in (night.message or "")


def test_combined_report_links_each_dashboards_own_report(tmp_path: Path) -> None:
    run_a = write_night(tmp_path, "brand-a", date(2026, 11, 22), seed=1)
    write_night(tmp_path, "brand-b", date(2026, 11, 22), seed=2)
    render_reports(run_a)
    estate = estate_of(tmp_path)
    directory = tmp_path / "estate" / estate.run_id
    estate.write(directory)
    html_path, text_path = render_estate(estate, directory)
    html, text = html_path.read_text(), text_path.read_text()

    assert html.index('id="estate"') < html.index('id="dashboard-1"') < html.index('id="dashboard-2"') < html.index(
        'id="dashboard-3"'), "the whole estate first, then one section per dashboard"
    link = html.split('<a href="')[-1].split('"')[0]
    assert (directory / link).resolve() == (run_a / "report" / "operator.html").resolve()
    assert "<script>" not in html and "&lt;script&gt;" in html, "state messages come from outside: escaped"
    assert "unreachable" in html and "connection refused" in html and "n/a" in html
    for block in ("brand-a", "brand-b", "brand-c"):
        assert block in text
    assert "2 OF 3 DASHBOARDS DID NOT COMPLETE" in text and str(estate.totals.updated) in text


def test_combined_report_is_delivered_like_the_others(tmp_path: Path, smtp_server: SmtpServer) -> None:
    write_night(tmp_path, "brand-a", date(2026, 11, 22), seed=1)
    estate = estate_of(tmp_path)
    directory = tmp_path / "estate"
    render_estate(estate, directory)

    eml = deliver_estate(estate, directory, MailSettings(smtp_host="", report_to=["ops@agency.example"]))
    assert [d.accepted for d in eml] == [False] and Path(eml[0].eml_path or "").name == "estate.eml"

    settings = MailSettings(smtp_host=smtp_server.host, smtp_port=smtp_server.port, smtp_security=SmtpSecurity.none,
                            report_to=["ops@agency.example"], mail_from="reports@agency.example")
    sent = deliver_estate(estate, directory, settings)
    assert [(d.recipient, d.accepted) for d in sent] == [("ops@agency.example", True)]
    (received,) = smtp_server.mailbox.received
    message = message_from_bytes(received.message.as_bytes(), policy=policy.default)
    assert "1 of 3 dashboards completed" in message["Subject"] and "2 with problems" in message["Subject"]
    assert re.search(r"; updated \d+ items?; failed \d+ items?, 2 with problems$", " ".join(message["Subject"].split()))
    assert {part.get_content_type() for part in message.walk()} >= {"text/plain", "text/html"}
