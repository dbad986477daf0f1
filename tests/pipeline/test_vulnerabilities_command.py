"""`fleet vulnerabilities show` reads the last night's summary.json (by site or by vulnerability); `fleet
vulnerabilities refresh` reads the feed now, one line either way; `fleet vulns`, the old name, still does both."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Item, Outcome, Summary, UpdateType
from fleet.model.vulnerability import (
    FeedStatus,
    ItemVulnerabilities,
    Vulnerability,
    VulnerabilityClass,
    VulnerableInstall,
)

NOW = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
CRITICAL = Vulnerability(id="w1", cve="CVE-2026-1111", cvss_score=9.8, cvss_rating="Critical")
MEDIUM = Vulnerability(id="w2", cve="CVE-2026-2222", cvss_score=5.4, cvss_rating="Medium")


def write_run(run_dir: Path) -> None:
    item = Item(site_id=1, site_url="https://one.example/", site_name="One", type=UpdateType.plugin,
                slug="forms/forms.php", name="Forms", from_version="1.0", to_version="1.1", outcome=Outcome.held,
                reason="held: checked first",
                security=ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(CRITICAL,)))
    Summary(run_id="r1", started_at=NOW, finished_at=NOW, dashboard="https://dash.example/wp-json", items=[item],
            exposure=[VulnerableInstall(site_id=2, site_url="https://two.example/", site_name="Two", type="plugin",
                                        slug="forms/forms.php", name="Forms", version="0.9",
                                        vulnerabilities=[CRITICAL, MEDIUM])],
            vulnerability_feed=FeedStatus(source="feed.json", fetched_at=NOW.isoformat(), records=2)).write(run_dir)


def test_show_by_site_and_by_vulnerability(tmp_path: Path) -> None:
    write_run(tmp_path / "run")
    by_site = CliRunner().invoke(app, ["vulnerabilities", "show", "--run", str(tmp_path / "run")])
    assert by_site.exit_code == 0, by_site.output
    assert "One (https://one.example/)\n    plugin Forms 1.0 → 1.1: fix held: CVE-2026-1111 9.8 Critical" \
        in by_site.output
    assert "plugin Forms 0.9: no fix offered: CVE-2026-1111 9.8 Critical; CVE-2026-2222 5.4 Medium" in by_site.output
    assert "2 sites with a known vulnerability" in by_site.output and "Wordfence" in by_site.output
    # issue 44: the copy in use, by its source and its age
    assert f"feed: the copy of feed.json, fetched {NOW.isoformat()} (less than an hour old)" in by_site.output
    by_vuln = CliRunner().invoke(app, ["vulnerabilities", "show", "--run", str(tmp_path / "run"),
                                       "--by", "vulnerability"])
    assert "CVE-2026-1111 9.8 Critical\n    One (https://one.example/)" in by_vuln.output
    assert "2 known vulnerabilities on the fleet" in by_vuln.output


def one_record_feed(tmp_path: Path, monkeypatch) -> Path:
    """A feed file of one record (forms up to 1.0), read from FLEET_VULN_FEED into the test's own state file."""
    feed = tmp_path / "feed.json"
    feed.write_text(json.dumps({"w1": {"id": "w1", "software": [{"type": "plugin", "slug": "forms",
                                                                 "affected_versions": {"*": {"to_version": "1.0"}}}]}}))
    monkeypatch.setenv("FLEET_VULN_FEED", str(feed))
    monkeypatch.setenv("FLEET_STATE_DB", str(tmp_path / "state.sqlite"))
    return feed


def test_refresh_reads_the_feed_now_and_says_a_bad_one_in_one_line(tmp_path: Path, monkeypatch) -> None:
    feed = one_record_feed(tmp_path, monkeypatch)
    good = CliRunner().invoke(app, ["vulnerabilities", "refresh"])
    assert good.exit_code == 0 and good.output.strip() == f"read 1 record from {feed}"
    feed.write_text('{"w1": {')
    bad = CliRunner().invoke(app, ["vulnerabilities", "refresh"])
    assert bad.exit_code == 1 and len(bad.output.strip().splitlines()) == 1
    assert "is not a whole JSON feed" in bad.output and "last good copy stays in use" in bad.output


def test_vulnerabilities_alone_lists_by_site_and_a_fix_installed_says_installed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FLEET_REPORT_DIR", str(tmp_path))
    none_yet = CliRunner().invoke(app, ["vulnerabilities"])
    assert none_yet.exit_code == 0 and none_yet.output.startswith("no run yet"), none_yet.output
    write_run(tmp_path / "20261127-020000-abcdef12")
    alone = CliRunner().invoke(app, ["vulnerabilities"])
    assert alone.exit_code == 0, alone.output
    assert alone.output == CliRunner().invoke(app, ["vulnerabilities", "show"]).output
    summary = Summary.read(tmp_path / "20261127-020000-abcdef12" / "summary.json")
    summary.items[0].outcome = Outcome.updated
    summary.write(tmp_path / "20261127-020000-abcdef12")
    shown = CliRunner().invoke(app, ["vulnerabilities"]).output
    assert "plugin Forms 1.0 → 1.1: fix installed: CVE-2026-1111" in shown and "fix updated" not in shown


def test_the_old_name_vulns_still_works_hidden_from_the_help(tmp_path: Path, monkeypatch) -> None:
    """Existing scripts call `fleet vulns`: it is the same command, alone, with `show` and with `refresh`."""
    monkeypatch.setenv("FLEET_REPORT_DIR", str(tmp_path))
    write_run(tmp_path / "20261127-020000-abcdef12")
    for words in ([], ["show"], ["show", "--by", "vulnerability"]):
        old = CliRunner().invoke(app, ["vulns", *words])
        assert old.exit_code == 0 and "CVE-2026-1111" in old.output, old.output
        assert old.output == CliRunner().invoke(app, ["vulnerabilities", *words]).output
    feed = one_record_feed(tmp_path, monkeypatch)
    refreshed = CliRunner().invoke(app, ["vulns", "refresh"])
    assert refreshed.exit_code == 0 and refreshed.output.strip() == f"read 1 record from {feed}"
    listed = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    assert "vulnerabilities" in listed and " vulns " not in listed


def test_refresh_says_its_line_once(tmp_path: Path) -> None:
    """As a terminal shows it (no test's logging in between): the failure is one line, not the log's copy too."""
    import os
    import subprocess
    import sys

    feed = tmp_path / "feed.json"
    feed.write_text('{"w1": {')
    root = Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items() if not key.startswith("FLEET_")}
    done = subprocess.run([sys.executable, "-c", "from cli.app import app; app()", "vulnerabilities", "refresh"],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(root), "FLEET_HOME": str(tmp_path / "home"),
                                             "FLEET_VULN_FEED": str(feed)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
