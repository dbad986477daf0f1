"""One break, one message, whole: a night that breaks two sites (one contained, one whose MainWP Child died) sends
the chat one message per break, each naming the site, the release, what the night did, what to do and the run's
link, and the failed night adds none. The chat is a local HTTP server that takes Slack's JSON (`{"text": ...}`,
refused without it, as Slack and the chats that speak its dialect do), reached through a custom-webhook block, the
block type that reaches a chat of one's own. Texts too long for a channel are cut at a word, with the link."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reporting.alert import NotStartedNotice, channel_limit, fit
from tests.pipeline.test_lab_sequences import Lab, sites_sharing_a_plugin


class SlackShaped(ThreadingHTTPServer):
    """Takes what a Slack incoming webhook takes: a JSON object with a non-empty `text` (400 `no_text` otherwise)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), SlackHook)
        self.texts: list[str] = []


class SlackHook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text.strip():
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b"no_text")
            return
        self.server.texts.append(text)  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat() -> Iterator[SlackShaped]:
    server = SlackShaped()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@given(st.lists(st.text(alphabet="abcdefghij:./-", min_size=1, max_size=30), min_size=1, max_size=80),
       st.sampled_from([130, 300, 1024]))
def test_a_text_too_long_is_cut_at_a_word_and_keeps_the_link(words: list[str], limit: int) -> None:
    line = " ".join(words)
    link = "http://prefect.example:4200/runs/flow-run/0199"
    said = fit(line, limit, link)
    assert len(said) <= limit and said.endswith(link)
    if said != f"{line} {link}":
        kept = said.removesuffix(f" … the rest: {link}").split(" ") if " … the rest: " in said else []
        # whole words, in order; the last without the trailing ",;:" that would dangle before the link
        whole = kept[:-1] == words[:len(kept) - 1] and kept[-1] == words[len(kept) - 1].rstrip(",;:")
        assert whole or kept == [""] or not kept, (said, line)


def test_the_cron_alert_names_the_dashboard_whole_on_a_pager() -> None:
    notice = NotStartedNotice(command="fleet nightly", flow="nightly-maintenance", dashboard="127.0.0.1:18181",
                              error="nightly run not started: cannot reach the dashboard at 127.0.0.1:18181 "
                                    "(FLEET_BASE_URL in /srv/fleet/.env): ConnectError: All connection attempts failed",
                              at=datetime(2026, 11, 27, 2, 0, tzinfo=UTC))
    for block in ("opsgenie-webhook/ops", "pager-duty-webhook/oncall", "custom-webhook/chat"):
        said = fit(notice.line, channel_limit(block), notice.link)
        assert len(said) <= channel_limit(block)
        assert all(part in notice.line.split(" ") for part in said.removesuffix(" …").split(" ")), said
        assert "127.0.0.1:181 " not in said + " " and not said.endswith("127.0.0.1:181")


@pytest.mark.usefixtures("prefect_harness")
def test_one_break_is_one_whole_message_and_the_failed_night_repeats_none(dashboard, chat: SlackShaped,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    CustomWebhookNotificationBlock(name="chat", url=f"http://127.0.0.1:{chat.server_port}/hooks/ops",
                                   json_data={"text": "{{body}}"}).save("chat", overwrite=True)
    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "custom-webhook/chat")
    lab = Lab(emulator := dashboard(sites=12, seed=4), tmp_path / "reports")
    slug, (broken, dead) = sites_sharing_a_plugin(emulator.truth())
    before = {site["id"]: lab.plugin(site, slug)["version"] for site in (broken, dead)}
    lab.offer(broken, slug, "99.3.0", fault="break")  # a front-end fatal: contained
    lab.offer(dead, slug, "99.3.0", fault="load")  # fatal at load: its child dies with it

    code, night, _ = lab.night(broken["id"], dead["id"])

    assert code == 7 and {alarm.site_id for alarm in night.broken} == {broken["id"], dead["id"]}
    assert len(chat.texts) == 2, chat.texts  # one per break; the failed night's message adds none
    assert not any("ended Failed" in text for text in chat.texts)
    for site in (broken, dead):
        [text] = [text for text in chat.texts if site["url"] in text]
        assert f"{before[site['id']]} → 99.3.0" in text, text  # the release
        assert "The night " in text and "To do: " in text and "restore version" in text, text
        assert re.search(r" https?://\S+/runs/flow-run/[0-9a-f-]{36}$", text), text  # the run's link, last
        assert "None" not in text and "…" not in text, text  # whole
    [contained] = [text for text in chat.texts if broken["url"] in text]
    assert "deactivated" in contained and "passes its check again" in contained
    [down] = [text for text in chat.texts if dead["url"] in text]
    assert "is down, unreachable by the dashboard" in down and "wp-content/plugins/" in down
    alerts = tmp_path / "reports" / "alerts"
    assert len(list(alerts.glob(f"break-{night.run_id}-*.eml"))) == 2 and not list(alerts.glob("alert-*.eml"))


@pytest.mark.usefixtures("prefect_harness")
def test_a_new_vulnerability_without_a_fix_and_a_fix_held_are_each_told_once(dashboard, chat: SlackShaped,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    """The first night with the feed is the baseline (its findings are in the report, not paged); a vulnerability
    published after it with no fix, and a fix offered that the policy holds, are told once each, through the chat
    block and by e-mail (here its file), and not again the next night."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    CustomWebhookNotificationBlock(name="chat", url=f"http://127.0.0.1:{chat.server_port}/hooks/ops",
                                   json_data={"text": "{{body}}"}).save("chat", overwrite=True)
    emulator = dashboard(sites=12, seed=4)
    credentials = emulator.server.credentials
    for name, value in {"FLEET_NOTIFY_BLOCK": "custom-webhook/chat", "FLEET_VULN_REFRESH": "0",
                        "FLEET_VULN_FEED": credentials["vulnerability_feed"],
                        "FLEET_VULN_FEED_KEY": credentials["admin_token"]}.items():
        monkeypatch.setenv(name, value)
    lab = Lab(emulator, tmp_path / "reports")
    slug, (site, _) = sites_sharing_a_plugin(emulator.truth())
    other = next(name for name, plugin in lab.site(site)["plugins"].items() if name != slug and plugin["active"])
    policy = tmp_path / "policy.yaml"
    policy.write_text(f'holds:\n  - item: "plugin:{other}"\n    reason: "the agency checks it first"\n')
    monkeypatch.setenv("FLEET_POLICY_FILE", str(policy))

    lab.night(site["id"])  # the baseline: nothing paged
    assert chat.texts == []
    version = lab.plugin(site, slug)["version"]
    emulator.post("vulnerabilities/publish", {"type": "plugin", "slug": slug, "to_version": version, "patched": []})
    held = lab.plugin(site, other)["version"]
    lab.offer(site, other, "99.1.0")
    emulator.post("vulnerabilities/publish", {"type": "plugin", "slug": other, "to_version": held,
                                              "patched": ["99.1.0"]})

    _, night, _ = lab.night(site["id"])

    [no_fix] = [news for news in night.security_news if news.kind == "no_fix"]
    [not_installed] = [news for news in night.security_news if news.kind == "not_installed"]
    assert len(chat.texts) == 2, chat.texts
    [said_no_fix] = [text for text in chat.texts if "with no fix yet" in text]
    assert no_fix.vulnerability.label in said_no_fix and site["url"] in said_no_fix and version in said_no_fix
    [said_held] = [text for text in chat.texts if "security fix not installed" in text]
    assert f"{held} → 99.1.0" in said_held and not_installed.vulnerability.label in said_held
    assert "held: the agency checks it first" in said_held and "held: held" not in said_held  # the word said once
    assert re.search(r"/runs/flow-run/[0-9a-f-]{36}$", said_held)
    assert len(list((tmp_path / "reports" / "alerts").glob(f"security-{night.run_id}-*.eml"))) == 2

    _, again, _ = lab.night(site["id"])  # still no fix, still held: told once
    assert again.security_news == [] and len(chat.texts) == 2


def test_every_chat_message_says_its_counts_in_the_vocabularys_words() -> None:
    """One word per count reaches the chat too: a count is said with its unit for one or many (the vocabulary's
    `count`), never "site(s)"; the approval gate's updates in the plan's word, "awaiting approval"."""
    from fleet.model.vocabulary import AWAITING_APPROVAL, count
    from fleet.model.vulnerability import Vulnerability, VulnerabilityNews
    from reporting.alert import ApprovalNotice, StillDownNotice, VulnerabilityNotice

    for n in (1, 2):
        approval = ApprovalNotice(flow="nightly-maintenance", run_name="brave-fox", run_id="1",
                                  dashboard="dash.example.com", items=("Shop: Forms 1.0 -> 1.1 (approval)",) * n,
                                  until="2026-11-27T03:00:00+00:00")
        down = StillDownNotice(run_name="r2", dashboard="dash.example.com", incident_id=3, site="Shop (https://shop)",
                               opened_by="r1", age_days=n, saw="HTTP 500", done="r1: broke", next_steps="restore it")
        news = VulnerabilityNotice(run_name="r2", dashboard="dash.example.com", news=VulnerabilityNews(
            kind="no_fix", vulnerability=Vulnerability(id="w1", cve="CVE-2026-1", cvss_score=9.8,
                                                       cvss_rating="Critical"),
            type="plugin", slug="forms", name="Forms", release="1.0", sites=[f"Site {i}" for i in range(n)]))
        for notice in (approval, down, news):
            for text in (notice.subject, notice.line, notice.body):
                assert "(s)" not in text, text
        assert f"{count(n, 'update')} {AWAITING_APPROVAL.word}" in approval.line
        assert f"{count(n, 'day')} after run r1" in down.line and f"on {count(n, 'site')}" in news.line


def test_the_failed_nights_message_names_only_the_breaks_not_told_when_found(tmp_path: Path) -> None:
    """A break a probe after an update step found was told then (it has a containment); one only the check after
    the night found was not: the failed night's message names that one alone, and nothing when none is left."""
    from fleet.model.summary import Containment, ContainmentStatus, SiteAlarm, Summary, UpdateType
    from fleet.rules.breakage import SitesBrokenByRun
    from orchestration.alert import breaks_not_told

    def alarm(site: int, contained: bool) -> SiteAlarm:
        return SiteAlarm(site_id=site, site_url=f"https://s{site}.example", site_name=f"Site {site}", saw="HTTP 500",
                         containment=Containment(step=UpdateType.plugin, status=ContainmentStatus.unreachable)
                         if contained else None)

    moment = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
    summary = Summary(run_id="r1", started_at=moment, finished_at=moment, broken=[alarm(1, True), alarm(2, False)])
    path = summary.write(tmp_path / "r1")
    said = breaks_not_told(SitesBrokenByRun("run r1 broke 2 site(s): …", str(path)))
    assert said is not None and "Site 2" in said and "Site 1" not in said
    summary.broken = [alarm(1, True)]
    summary.write(tmp_path / "r1")
    assert breaks_not_told(SitesBrokenByRun("run r1 broke 1 site(s): …", str(path))) is None
