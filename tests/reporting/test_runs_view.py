"""`fleet runs` and `fleet runs show`, the morning-after view: each night's status as its exit code says it, the
sites down at its end, its open incidents, and every count as the reports count it (a dry run in its own words).

Built from summaries as the nights write them; the counts are checked against the reports' own arithmetic
(`reporting.model`'s: not updated = everything found minus what was updated)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import DRY_RUN_RULE, Incident, Item, Outcome, SiteAlarm, Summary, UpdateType
from fleet.model.vocabulary import operator_voice, said_counts

START = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)


def item(site: int, outcome: Outcome, rule: str | None = None, n: int = 0) -> Item:
    return Item(site_id=site, site_url=f"https://s{site}.example", site_name=f"Site {site}", type=UpdateType.plugin,
                slug=f"plugin-{n}", name=f"Plugin {n}", from_version="1.0", to_version="1.1", outcome=outcome,
                rule=rule)


def incident(number: int, site: int, opened_by: str, *, down: bool) -> Incident:
    return Incident(id=number, dashboard="https://dash.example/wp-json", site_id=site, site_url=f"https://s{site}.example",
                    site_name=f"Site {site}", opened_by=opened_by, opened_at=START, status="unreachable", down=down)


def night(report_dir: Path, day: int, items: list[Item], **fields: object) -> Summary:
    started = START + timedelta(days=day)
    run_id = f"{started:%Y%m%d-%H%M%S}-{day:08x}"  # as a run names itself: 24 characters
    summary = Summary(run_id=run_id, started_at=started, finished_at=started + timedelta(minutes=5), items=items,
                      counts=Summary.count(items), **fields)
    summary.write(report_dir / run_id)
    return summary


def alarm(site: int) -> SiteAlarm:
    return SiteAlarm(site_id=site, site_url=f"https://s{site}.example", site_name=f"Site {site}", saw="HTTP 500")


def test_fleet_runs_says_each_night_as_its_exit_code_and_counts_as_the_reports(tmp_path: Path) -> None:
    mixed = [item(1, Outcome.updated, n=1), item(1, Outcome.updated, n=2), item(2, Outcome.failed, n=3),
             item(2, Outcome.unchanged, n=4), item(3, Outcome.ignored, n=5), item(3, Outcome.excluded, "semver", n=6),
             item(3, Outcome.held, n=7)]
    broke = night(tmp_path, 1, mixed, broken=[alarm(2)],
                  incidents=[incident(1, 2, "x", down=True)])
    broke.incidents[0].opened_by = broke.run_id
    broke.write(tmp_path / broke.run_id)
    down = night(tmp_path, 2, [item(1, Outcome.updated)], incidents=[incident(1, 2, broke.run_id, down=True)])
    dry = night(tmp_path, 3, [item(1, Outcome.excluded, DRY_RUN_RULE, n=1), item(1, Outcome.excluded, DRY_RUN_RULE,
                                                                                    n=2),
                              item(2, Outcome.excluded, "semver", n=3)], dry_run=True)
    nothing = night(tmp_path, 4, [item(1, Outcome.unknown)], did_nothing="no site synced")

    listed = CliRunner().invoke(app, ["runs", "--report-dir", str(tmp_path)])

    assert listed.exit_code == 0, listed.output
    rows = {line.split()[0]: line for line in listed.output.splitlines()[1:5]}
    assert rows[broke.run_id].split()[1:] == ["broke", "1", "2", "1", "5", "1", "1", "-"]
    assert rows[down.run_id].split()[1:] == ["still", "down", "1", "1", "0", "0", "0", "1", "-"]
    assert rows[nothing.run_id].split()[1:4] == ["did", "nothing", "0"]
    assert rows[dry.run_id].split(maxsplit=1)[1] == "dry run       would update 2; would not update 1"
    assert max(len(line) for line in listed.output.splitlines()[:-1]) <= 80  # the table and its keys; then the path
    # the reports' arithmetic on the whole summary: updated, and everything else "not updated" (failed included)
    said = said_counts(broke)
    voice = operator_voice()
    assert voice.total(said, voice.done) == 2 and len(broke.items) - voice.total(said, voice.done) == 5

    shown = CliRunner().invoke(app, ["runs", "show", down.run_id, "--report-dir", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0] == f"run {down.run_id}: still down 1"
    assert "  down at the night's end: 1 site" in shown.output
    assert f"  incident 1 open: Site 2 (https://s2.example), down, unreachable by the dashboard, since run " \
           f"{broke.run_id} (fleet incidents show 1)" in shown.output

    shown = CliRunner().invoke(app, ["runs", "show", dry.run_id, "--report-dir", str(tmp_path)])
    assert shown.output.splitlines()[0] == f"dry run {dry.run_id}: dry run"
    assert "  items: would update 2; excluded 1 (would not update 1 in all)" in shown.output, shown.output
    assert "excluded 3" not in shown.output


def test_reports_written_as_eml_on_purpose_are_not_sent_0_of_2_and_name_no_empty_recipient(tmp_path: Path) -> None:
    from fleet.model.summary import Delivery

    as_files = [Delivery(report="operator", recipient="", accepted=False, eml_path="operator.eml",
                         answer="not sent: no SMTP host configured (FLEET_SMTP_HOST)"),
                Delivery(report="Acme", recipient="", accepted=False, eml_path="client-acme.eml", answer="not sent")]
    written = night(tmp_path, 1, [item(1, Outcome.updated)], deliveries=as_files)
    mixed = night(tmp_path, 2, [item(1, Outcome.updated)], deliveries=[
        Delivery(report="operator", recipient="ops@agency.example", accepted=True, answer="250 ok"),
        Delivery(report="Acme", recipient="", accepted=False, eml_path="client-acme.eml", answer="no address")])

    listed = CliRunner().invoke(app, ["runs", "--report-dir", str(tmp_path)]).output
    rows = {line.split()[0]: line.split() for line in listed.splitlines()[1:3]}
    assert rows[written.run_id][-1] == ".eml" and rows[mixed.run_id][-1] == "1/1", listed
    assert ".eml: written as .eml files, not sent" in listed
    shown = CliRunner().invoke(app, ["runs", "show", written.run_id, "--report-dir", str(tmp_path)]).output
    assert "  report operator: written as .eml: operator.eml" in shown and "-> :" not in shown, shown
