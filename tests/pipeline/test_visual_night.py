"""The night sees what a visitor sees (the policy's `visual:`): real nights against the emulator's real pages over a
socket, shot in the system Chromium. A site with a carousel passes two nights without a false alarm; a release
that takes the stylesheet away or blanks a section while the site answers 200 is a break like an HTTP one (the
culprit found and deactivated, its version held, the report led by the images); a release that changes the page a
little sends its version to the approval gate before it reaches another site."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.flow_runs import aresume_flow_run
from prefect.settings import PREFECT_API_URL, PREFECT_LOCAL_STORAGE_PATH

from cli.commands.approve import waiting_items
from emulator.site_theme import moving_content
from fleet.model.summary import Band, ContainmentStatus, Outcome, Selection, UpdateType
from fleet.visual.capture import CHROMIUM, PageCapture, chromium_path
from flows.nightly import nightly_maintenance
from reporting.run_report import render_reports
from tests.pipeline.conftest import Dashboard, installed, read_run
from tests.pipeline.test_windows_night import _paused_run

pytestmark = [pytest.mark.long(27), pytest.mark.usefixtures("prefect_harness"), pytest.mark.skipif(
    chromium_path() is None, reason=f"no Chromium at {CHROMIUM}: install Debian's `chromium` to run these")]

# the home page alone (each page load costs Chromium about 1 s of CPU); the second-night test takes two pages
VISUAL = {"sitemap_pages": 0, "viewports": ["desktop"], "baseline_gap_seconds": 0.3}


async def night(ids: list[str], policy: str) -> str:
    """One nightly run (reports rendered, none sent); the summary's path, whether the night broke a site or not."""
    state = await nightly_maintenance(selection=Selection(sites=ids), policy_file=policy, send_report=False,
                                      return_state=True)
    result = await state.result(raise_on_failure=False)
    return result if isinstance(result, str) else result.summary_path


def write_policy(tmp_path: Path, **policy: Any) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"visual": VISUAL, **policy}))
    return str(path)


def offered_plugins(site: Any) -> list[str]:
    """The active plugins that offer a release."""
    return [slug for slug, item in site.plugins.items() if item.offer and item.active]


def sites_with_plugin_updates(emulator: Dashboard, moving: str | None = None) -> list[Any]:
    """The emulator's healthy connected sites with an active plugin offering a release (and the moving content
    asked for)."""
    return [site for site in sorted(emulator.server.emulator.state.sites.values(), key=lambda s: s.id)
            if site.reachable and site.child_connected and not site.suspended and not site.broken_by
            and not site.fatal_by and not site.visual_faults and offered_plugins(site)
            and (moving is None or moving_content(site) == moving)]


# one mode: the night's path (shots, judging, containment, the report) is the same for every break the scores call
# broken, and each mode's score is tested where it is made (tests/visual/test_capture.py, css and blank); the
# night's second mode cost the suite 25 to 60 s on 2 cores
@pytest.mark.parametrize("mode", ["css"])
async def test_a_release_that_breaks_the_page_visually_is_contained_and_leads_the_report(
        dashboard, tmp_path: Path, mode: str) -> None:
    emulator = dashboard(sites=30, seed=22)
    site = sites_with_plugin_updates(emulator, "")[0]
    slug = offered_plugins(site)[0]
    emulator.post("faults/visual", {"site_id": site.id, "type": "plugin", "slug": slug, "mode": mode})
    others = [s for s in sites_with_plugin_updates(emulator) if s.id != site.id][:1]  # one proves no false alarm
    ids = [str(site.id)] + [str(s.id) for s in others]
    run = await night(ids, write_policy(tmp_path))
    summary, _ = read_run(run)
    truth = emulator.truth()["sites"][str(site.id)]
    [alarm] = summary.broken
    assert alarm.site_id == site.id and alarm.containment is not None
    assert alarm.containment.status is ContainmentStatus.contained and alarm.containment.culprit.slug == slug
    assert alarm.containment.saw.startswith("looks broken")
    assert [s.slug for s in alarm.suspects] == [slug]
    assert truth["visual"]["break"] is None, "deactivated, the plugin's break is gone"
    assert not truth["plugins"][slug]["active"]
    look = summary.looks[0]
    assert look.site_id == site.id and look.band is Band.broken and look.step is UpdateType.plugin
    broken_page = look.worst
    for image in (broken_page.before, broken_page.after, broken_page.diff):
        assert image and (Path(run).parent / image).is_file()
    assert any(hold.slug == slug for hold in summary.holds)
    healthy = [other for other in summary.looks if other.site_id != site.id]
    assert healthy and all(other.band is Band.healthy for other in healthy)
    rendered = render_reports(Path(run).parent)
    text = rendered.path(rendered.operator, ".txt").read_text()
    assert "looks broken" in text and broken_page.diff in text
    html = rendered.path(rendered.operator, ".html").read_text()  # the pictures lead, before any count
    assert html.index(broken_page.after) < html.index("At a glance") and html.count("data:image/jpeg") >= 3


async def test_a_change_for_review_sends_its_version_to_the_approval_gate(dashboard, tmp_path: Path) -> None:
    emulator = dashboard(sites=40, seed=23)
    by_release: dict[tuple[str, str], list[Any]] = {}
    for site in sites_with_plugin_updates(emulator, ""):
        for slug in offered_plugins(site):
            by_release.setdefault((slug, site.plugins[slug].offer), []).append(site)
    (slug, _), sharing = max(by_release.items(), key=lambda kv: len(kv[1]))
    assert len(sharing) >= 2, "two sites offered one release"
    first, later = sharing[0], sharing[1]
    emulator.post("faults/visual", {"site_id": first.id, "type": "plugin", "slug": slug, "mode": "notice"})
    policy = write_policy(tmp_path, rollout={"cohorts": [f"site:{first.id}", "rest"]},
                          approval={"timeout": "5m"})
    running = asyncio.create_task(night([str(first.id), str(later.id)], policy))
    run = await _paused_run(running)
    rows = await waiting_items(run.id)
    assert [(row["site_id"], row["item"]) for row in rows] == [(later.id, f"plugin:{slug}")]
    assert "looks different" in rows[0]["why"] and first.name in rows[0]["why"]
    truth = emulator.truth()
    assert installed(truth, later.id, UpdateType.plugin, slug) != truth["sites"][str(first.id)]["plugins"][slug][
        "version"], "the version under review reached no other site before the gate"
    await aresume_flow_run(run.id, run_input={"items": rows, "approve_all": True, "approved_by": "Ada"})
    summary, _ = read_run(await running)
    assert [look.band for look in summary.looks if look.site_id == first.id] == [Band.review]
    assert summary.approval.approved == 1 and not summary.broken
    [approved] = [item for item in summary.items if item.site_id == later.id and item.slug == slug]
    assert approved.outcome is Outcome.updated and approved.approved_by == "Ada"
    truth = emulator.truth()
    assert installed(truth, later.id, UpdateType.plugin, slug) == installed(truth, first.id, UpdateType.plugin, slug)


async def test_the_second_night_starts_from_the_first_nights_shots_and_still_finds_a_break(
        dashboard, tmp_path: Path, monkeypatch) -> None:
    """Two nights, one emulator, one state home: a site left healthy with nothing applied since is not shot before
    its first update on the second night (its baseline is the first night's last shot, its mask the one learned),
    and the second night still tells a break from what moves by itself: a carousel's site passes both nights
    without a false alarm (this test took over that test's two nights, for the suite's time)."""
    emulator = dashboard(sites=30, seed=24)
    carousel = sites_with_plugin_updates(emulator, "carousel")[:1]
    calm = [s for s in sites_with_plugin_updates(emulator, "") if len(offered_plugins(s)) >= 1][:2]
    chosen = carousel + calm
    assert len(chosen) == 3
    ids = [str(site.id) for site in chosen]
    policy = write_policy(tmp_path, visual={**VISUAL, "sitemap_pages": 1})
    shots: list[tuple[str, str]] = []  # (label, site key) of every shot taken
    original = PageCapture.shoot_each

    async def counted(self, wanted, label):
        shots.extend((label, site) for site, _, _ in wanted)
        return await original(self, wanted, label)

    monkeypatch.setattr(PageCapture, "shoot_each", counted)
    first_run = await night(ids, policy)
    first, _ = read_run(first_run)
    assert all(look.band is Band.healthy for look in first.looks) and len(first.looks) == 3
    assert not first.broken and not first.approval and any(item.outcome is Outcome.updated for item in first.items)
    first_baselines = [label for label, _ in shots if label.startswith("before")]
    assert len(first_baselines) == 2 * 3 * 2, "two shots of two pages of three sites on the first night"

    broken = calm[0]  # the second night: new releases everywhere, one of them takes the stylesheet away
    for site in chosen:
        slug = next(iter(site.plugins))
        emulator.post("offers", {"site_id": site.id, "type": "plugin", "slug": slug, "version": "99.0.0"})
    bad_slug = next(iter(broken.plugins))
    emulator.post("faults/visual", {"site_id": broken.id, "type": "plugin", "slug": bad_slug, "mode": "css"})
    shots.clear()
    second_run = await night(ids, policy)
    second, _ = read_run(second_run)
    assert [label for label, _ in shots if label.startswith("before")] == [], "every baseline came from night one"
    assert [alarm.site_id for alarm in second.broken] == [broken.id]
    assert second.broken[0].containment.culprit.slug == bad_slug
    bands = {look.site_id: look.band for look in second.looks}
    # the carousel's site moves by itself between every shot and is healthy on both nights: no false alarm
    assert bands == {broken.id: Band.broken, **{site.id: Band.healthy for site in chosen if site is not broken}}
    assert not second.approval and all(page.score is not None for look in second.looks for page in look.pages)
    assert {page.page for look in second.looks for page in look.pages} >= {"home"}
    # the carried baseline is the first night's last shot of the page, byte for byte (the shot a report keeps is the
    # first step's: the last one for a site with one step that changes its look)
    one_step = [site for site in chosen if len({item.type for item in first.items if item.site_id == site.id
                                                and item.outcome is Outcome.updated} - {UpdateType.translation}) == 1]
    assert one_step
    for site in one_step:
        before = next(look for look in first.looks if look.site_id == site.id).pages[0]
        after = next(look for look in second.looks if look.site_id == site.id).pages[0]
        assert (before.page, before.viewport) == (after.page, after.viewport)
        assert ((Path(second_run).parent / after.before).read_bytes()
                == (Path(first_run).parent / before.after).read_bytes())


async def test_a_separate_task_worker_process_takes_the_screenshots(dashboard, tmp_path: Path, monkeypatch) -> None:
    """With FLEET_VISUAL_TASK_WORKERS the night shoots nothing itself: `fleet screenshots serve`, another process,
    serves its batches of shots as Prefect background task runs, the images come back through result storage,
    and the night judges them as its own: the break found and contained, the healthy sites healthy."""
    emulator = dashboard(sites=30, seed=22)
    site = sites_with_plugin_updates(emulator, "")[0]
    slug = offered_plugins(site)[0]
    emulator.post("faults/visual", {"site_id": site.id, "type": "plugin", "slug": slug, "mode": "css"})
    others = [s for s in sites_with_plugin_updates(emulator) if s.id != site.id][:1]
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env |= {"PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_HOME": str(tmp_path / "worker-home"),
            "PREFECT_LOCAL_STORAGE_PATH": str(PREFECT_LOCAL_STORAGE_PATH.value()),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([str(Path(sys.executable).parent / "fleet"), "screenshots", "serve", "--runs", "2"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    launched: list[object] = []
    original = PageCapture.__aenter__

    async def counted(self):
        launched.append(self)
        return await original(self)

    monkeypatch.setattr(PageCapture, "__aenter__", counted)
    monkeypatch.setenv("FLEET_VISUAL_TASK_WORKERS", "true")
    monkeypatch.setenv("FLEET_VISUAL_WORKER_TIMEOUT_SECONDS", "300")
    try:
        summary, _ = read_run(await night([str(site.id)] + [str(s.id) for s in others], write_policy(tmp_path)))
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
        log.close()
    assert launched == [], "the night's own process started no Chromium"
    # the worker's own account: each batch it was handed ran there and completed (the test servers keep no task
    # run states: tests/prefect_home.py)
    said = (tmp_path / "worker.log").read_text()
    received = re.findall(r"Received task run: ([0-9a-f-]{36}) - shoot-pages", said)
    assert received and said.count("Task run 'shoot-pages' - Finished in state Completed()") == len(received), said
    [alarm] = summary.broken
    assert alarm.site_id == site.id and alarm.containment.culprit.slug == slug
    bands = {look.site_id: look.band for look in summary.looks}
    assert bands == {site.id: Band.broken, **{other.id: Band.healthy for other in others}}
