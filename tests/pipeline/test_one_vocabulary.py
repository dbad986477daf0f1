"""One vocabulary from console to client: a dry run, then the real night of the same day, against the emulator
over a real socket. Every count carries the same word and number in the console's closing line, the mail subject
and the three report formats; the dry run says what it planned from; the night says how it differed from it."""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import UTC, date, datetime
from email import message_from_bytes, policy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import DRY_RUN_RULE, Outcome, Summary
from fleet.model.vocabulary import client_voice, operator_voice
from fleet.model.vulnerability import VulnerabilityClass
from reporting.run_report import file_stem

pytestmark = pytest.mark.usefixtures("prefect_harness")
PAIRS = re.compile(r"([a-z][a-z ,]*?) (\d+)")


def pairs(listed: str) -> dict[str, int]:
    """`updated 12; failed 1` -> {"updated": 12, "failed": 1}."""
    found = [PAIRS.fullmatch(part.strip()) for part in listed.split(";")]
    assert all(found), listed
    return {match[1]: int(match[2]) for match in found if match}


def console_line(output: str, run_id: str) -> str:
    [line] = [line for line in output.splitlines() if re.match(rf"(dry run|run) {re.escape(run_id)}: ", line)]
    return line


def glance_txt(text: str) -> dict[str, int]:
    block = text.split("  By outcome:\n", 1)[1].split("\n\n", 1)[0]
    return {title.strip().lower(): int(n) for title, n in re.findall(r"^  (\S.*?)\s+(\d+)$", block, re.M)
            if title.strip() != "Total"}


def glance_md(md: str) -> dict[str, int]:
    block = md.split("## At a glance\n", 1)[1].split("\n## ", 1)[0]
    return {title.lower(): int(n) for title, n in re.findall(r"^\| ([^|*]+?) \| (\d+) \|$", block, re.M)}


def glance_html(html: str) -> dict[str, int]:
    found = re.findall(r'<span[^>]*class="badge"[^>]*>([^<]+)</span></td><td[^>]*data-outcome="[^"]+"[^>]*>(\d+)</td>',
                       html)
    return {title.lower(): int(n) for title, n in found}


def subject_of(eml: Path) -> dict[str, int]:
    subject = " ".join(message_from_bytes(eml.read_bytes(), policy=policy.default)["Subject"].split())
    counts = subject.rsplit(": ", 1)[1]
    assert all(re.search(r"\d+ items?$", part) for part in counts.split(";")), subject  # each count its unit
    return pairs(re.sub(r" items?(?=;|$)", "", counts))


def words_of(summary: Summary, client: str | None = None) -> dict[str, int]:
    """Every count of the summary in the vocabulary's words, straight from its items."""
    voice = client_voice() if client is not None else operator_voice(summary.dry_run)
    counted = Counter(Outcome.updated if item.rule == DRY_RUN_RULE else item.outcome
                      for item in summary.items if client is None or item.client == client)
    return {term.word: n for term, n in voice.tally(counted)}


def assert_one_word_per_count(run_dir: Path, stem: str, expected: dict[str, int], subject: dict[str, int]) -> None:
    """The report's three formats say every count in the expected words; the subject's counts are among them."""
    report = run_dir / "report"
    assert glance_txt((report / f"{stem}.txt").read_text()) == expected
    assert glance_md((report / f"{stem}.md").read_text()) == expected
    assert glance_html((report / f"{stem}.html").read_text()) == expected
    assert subject and all(expected.get(word, 0) == number for word, number in subject.items())  # "updated 0" too


def a_policy_for_every_outcome(emulator, tmp_path: Path) -> tuple[Path, str]:
    """A policy that holds one plugin, delays another, leaves core out and puts one client in a blackout today;
    returns it and that client."""
    state = emulator.server.emulator.state
    truth = emulator.truth()["sites"]
    clients = {client.id: client.name for client in state.clients.values()}
    by_client = Counter(state.sites[int(site_id)].client_id for site_id in truth)
    blackout = clients[min((cid for cid in by_client if cid in clients), key=lambda cid: (by_client[cid], cid))]
    plugins = Counter(u["slug"] for site in truth.values() for u in site["pending_updates"] if u["type"] == "plugin")
    (held, _), (delayed, _) = plugins.most_common(2)
    today = date.today().isoformat()
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(f"""
types: {{translation: true, plugin: true, theme: true, core: false}}
holds:
  - item: "plugin:{held}"
    reason: "waiting for the client's go-ahead"
items:
  "plugin:{delayed}": {{min_age_days: 5}}
blackouts:
  - {{from: {today}, to: {today}, clients: ["{blackout}"], reason: "launch week"}}
reply_to:
  "{blackout}": care@agency.example
""")
    return policy_file, blackout


def faults_after(emulator, dry: Summary) -> list[int]:
    """What the dry run could not know: one item that will fail, one that will fail silently, and two sites its
    last sync had online that will not answer. Returns those two sites."""
    would = [item for item in dry.items if item.rule == DRY_RUN_RULE and item.type == "plugin"]
    kept = {item.site_id for item in dry.items if item.outcome in (Outcome.held, Outcome.delayed)}
    failing = would[0]
    silent = next(item for item in would if item.site_id != failing.site_id)
    for item, mode in ((failing, "fail"), (silent, "silent")):
        emulator.post("faults/items", {"site_id": item.site_id, "type": "plugin", "slug": item.slug, "mode": mode})
    offline = sorted({item.site_id for item in would} - kept - {failing.site_id, silent.site_id})[:2]
    for site_id in offline:
        emulator.post("faults/reachable", {"site_id": site_id, "reachable": False})
    return offline


class Lines(logging.Filter):
    """The flow run's log lines. A filter, not a handler: Prefect configures its loggers again when a flow starts
    (`logging.config.dictConfig`), which removes the handlers added before, caplog's too, but keeps filters."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.lines.append(record.getMessage())
        return True


def assert_the_security_section_counts_in_the_same_words(run_dir: Path, summary: Summary) -> None:
    """The known vulnerabilities' counts (fixes installed; not installed, by word) are the items' own, in the words
    of the outcomes, in the three formats of the operator's report."""
    fixes = [item for item in summary.items if item.security and item.security.security is VulnerabilityClass.fixes]
    installed = sum(1 for item in fixes if item.outcome is Outcome.updated)
    by_word = Counter(operator_voice().term(item.outcome).word for item in fixes if item.outcome is not Outcome.updated)
    assert fixes and by_word, "the night has fixes to count, installed and not"
    for suffix in (".txt", ".md", ".html"):
        text = (run_dir / "report" / f"operator{suffix}").read_text().replace("\\", "")
        said = re.search(r"(\d+) security fix(?:es)? installed[^;.]*(?:; (\d+) not installed while vulnerable "
                         r"\(([^)]*)\))?", text)
        assert said, suffix
        assert int(said[1]) == installed, suffix
        assert (pairs(said[3]) if said[3] else {}) == dict(by_word), suffix


def test_a_dry_run_and_then_the_night_say_every_count_in_one_word_everywhere(dashboard, tmp_path: Path, monkeypatch):
    emulator = dashboard(sites=16, seed=5)
    credentials = emulator.server.credentials
    monkeypatch.setenv("FLEET_VULN_FEED", credentials["vulnerability_feed"])  # the vulnerability section counts too
    monkeypatch.setenv("FLEET_VULN_FEED_KEY", credentials["admin_token"])
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@example.com")
    monkeypatch.setenv("FLEET_MAIL_FROM", "Fleet reports <reports@agency.example>")
    monkeypatch.setenv("FLEET_REPLY_TO", "help@agency.example")
    policy_file, blackout = a_policy_for_every_outcome(emulator, tmp_path)
    out = tmp_path / "runs"
    runner = CliRunner()

    log, logger = Lines(), logging.getLogger("prefect.flow_runs")
    logger.addFilter(log)
    try:
        dry = runner.invoke(app, ["nightly", "--dry-run", "--policy", str(policy_file), "--report-dir", str(out)])
    finally:
        logger.removeFilter(log)
    assert dry.exit_code == 0, dry.output
    [dry_dir] = [path.parent for path in out.glob("*/summary.json")]
    dry_summary = Summary.read(dry_dir)
    said = words_of(dry_summary)
    assert {"would update", "held", "delayed", "ignored", "excluded", "deferred"} <= set(said), said
    assert said["would update"] == sum(1 for item in dry_summary.items if item.rule == DRY_RUN_RULE)

    line = console_line(dry.output, dry_summary.run_id)  # `dry run ID: N items on M sites: would update 9; ...`
    head, listed, planned = re.fullmatch(r"(.*? sites): (.*); (planned from .*)", line).groups()
    assert head == f"dry run {dry_summary.run_id}: {len(dry_summary.items)} items on {len(dry_summary.sites)} sites"
    assert pairs(listed) == said
    truth = emulator.truth()["sites"]
    syncs = [datetime.fromtimestamp(site["last_sync"], UTC) for site in truth.values()]
    synced = dry_summary.last_sync
    assert abs((synced.oldest - min(syncs)).total_seconds()) < 1  # the emulator's own last syncs of the sites
    assert abs((synced.newest - max(syncs)).total_seconds()) < 1
    assert planned == (f"planned from the dashboard's last syncs (between {synced.oldest:%d %b %Y %H:%M} UTC and "
                       f"{synced.newest:%d %b %Y %H:%M} UTC), so the real night may differ")
    [plan_line] = [line for line in log.lines if line.startswith("dry-run plan: ")]
    assert plan_line == (f"dry-run plan: {len(dry_summary.sites)} sites, {len(dry_summary.items)} items: {listed}; "
                         f"{planned}")  # the plan's words are the summary's
    dry_subject = subject_of(dry_dir / "operator.eml")
    assert dry_subject == {"would update": said["would update"]}
    assert_one_word_per_count(dry_dir, "operator", said, dry_subject)
    for suffix in (".txt", ".html", ".md"):
        assert planned in (dry_dir / "report" / f"operator{suffix}").read_text().replace("\\", ""), suffix

    offline = faults_after(emulator, dry_summary)
    real = runner.invoke(app, ["nightly", "--policy", str(policy_file), "--report-dir", str(out)])
    assert real.exit_code == 0, real.output
    [night_dir] = [path.parent for path in out.glob("*/summary.json") if path.parent != dry_dir]
    night = Summary.read(night_dir)
    said = words_of(night)
    assert {"updated", "failed", "unchanged", "held", "delayed", "ignored", "excluded", "skipped",
            "deferred"} <= set(said), said
    line = console_line(real.output, night.run_id)
    head, listed = re.fullmatch(r"(.*? sites): (.*)", line).groups()
    assert head == f"run {night.run_id}: {len(night.items)} items on {len(night.sites)} sites"
    assert pairs(listed) == said
    subject = subject_of(night_dir / "operator.eml")
    assert subject == {word: said[word] for word in ("updated", "failed", "no answer", "unchanged") if word in said}
    assert_one_word_per_count(night_dir, "operator", said, subject)
    assert_the_security_section_counts_in_the_same_words(night_dir, night)

    # the night says how it differed from the dry run: what it would update, and what became of it
    would = {(i.site_id, i.type, i.slug) for i in dry_summary.items if i.rule == DRY_RUN_RULE}
    tonight = {(i.site_id, i.type, i.slug): i.outcome for i in night.items}
    updated = sum(1 for key in would if tonight.get(key) is Outcome.updated)
    skipped = [key for key in would if tonight.get(key) is Outcome.skipped]
    skipped_sites = {site_id for site_id, _, _ in skipped}
    assert set(offline) <= skipped_sites  # and any other its sync found unusable (a child no longer connected)
    text = (night_dir / "report" / "operator.txt").read_text()
    section = text.split("Against the dry run\n===================\n", 1)[1].split("\n\n", 1)[0]
    assert f"would update {len(would)} items." in section and f"Tonight: updated {updated} of them; not updated " \
        in section
    assert f"skipped {len(skipped)} (on {len(skipped_sites)} sites)" in section
    html = (night_dir / "report" / "operator.html").read_text()
    assert html.count('data-row="against-dry-run"') >= 2 and f"skipped {len(skipped)} (on {len(skipped_sites)} sites)" \
        in html

    # each client reads its own counts in its own words, in the subject and every format; a reply reaches the
    # address its footer names (the policy's own for the client in the blackout, FLEET_REPLY_TO for the others)
    for client in night.clients:
        stem = file_stem(client.name)
        expected = words_of(night, client.name)
        message = message_from_bytes((night_dir / f"{stem}.eml").read_bytes(), policy=policy.default)
        reply = "care@agency.example" if client.name == blackout else "help@agency.example"
        assert message["Reply-To"] == reply and message["From"] == "Fleet reports <reports@agency.example>"
        text = (night_dir / "report" / f"{stem}.txt").read_text()
        assert text.endswith(f"Questions? Just reply to this e-mail: it reaches {reply}.\n\n")
        if not expected:
            continue
        assert_one_word_per_count(night_dir, stem, expected, subject_of(night_dir / f"{stem}.eml"))
        if client.name == blackout:
            assert set(expected) == {"outside the maintenance times"} | ({"left out on purpose"} & set(expected))
