"""Fleet Guard in a real WordPress (Debian's packages; skipped, saying why, where they are missing): a plugin fatal
at load is found by leaving plugins out, paused, switched off as the dashboard would, its kept version put back;
forged, expired, replayed, oversized and misdirected requests get the ordinary page and change nothing."""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from guard.build import build_zip
from guard.client import HEADER, GuardClient, GuardRefused, GuardSilent, GuardSite, report_of
from guard.keys import FleetKeys
from guard.signing import envelope, private_key, public_key_text, signed_body
from tests.guard.wordpress_site import WordPressSite, missing, plugin_zip

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

KEY = private_key(base64.b64encode(b"fleet-guard-real-wordpress-test!").decode())
STRANGER = private_key(base64.b64encode(b"not-the-fleet-key-of-this-site!!").decode())
CANARY = "canary/canary.php"
INNOCENT = "innocent/innocent.php"


def canary(version: str, fatal: bool = False) -> dict[str, str]:
    body = "canary_undefined_function();\n" if fatal else \
        f"add_action( 'wp_footer', function () {{ echo '<p>canary {version}</p>'; }} );\n"
    return {"canary.php": f"<?php\n/*\nPlugin Name: Canary\nVersion: {version}\n*/\n{body}"}


@pytest.fixture(scope="module")
def wordpress(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WordPressSite]:
    root = tmp_path_factory.mktemp("wordpress")
    site = WordPressSite(root).start()
    try:
        site.install_plugin(build_zip(root / "zips", [public_key_text(KEY)]))
        site.install_plugin(plugin_zip(root / "zips" / "canary-1.0.zip", "canary", canary("1.0")))
        site.install_plugin(plugin_zip(root / "zips" / "innocent.zip", "innocent", {
            "innocent.php": "<?php\n/*\nPlugin Name: Innocent\nVersion: 2.0\n*/\n"}))
        for plugin in ("fleet-guard/fleet-guard.php", CANARY, INNOCENT):
            assert "activated" in site.wp("activate", plugin)
        yield site
    finally:
        site.stop()


@pytest.fixture
async def guard(wordpress: WordPressSite) -> Iterator[tuple[GuardClient, GuardSite]]:
    async with httpx.AsyncClient(timeout=30) as http:
        yield GuardClient(http, FleetKeys(KEY)), GuardSite(wordpress.url, wordpress.url)


def post(site: WordPressSite, body: bytes) -> httpx.Response:
    return httpx.post(site.url, content=body, headers={HEADER: "1"}, timeout=30)


async def test_a_plugin_fatal_at_load_is_found_paused_switched_off_and_its_kept_version_put_back(
        wordpress: WordPressSite, guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    before = await client.status(site)
    assert before.mode == "must-use" and before.unusable is None and before.problems == []
    assert before.plugins[CANARY].version == "1.0" and before.plugins[CANARY].active

    # the update: WordPress's upgrader, whose pre-install hook the guard keeps the installed version at
    new = plugin_zip(wordpress.root / "zips" / "canary-1.1.zip", "canary", canary("1.1", fatal=True))
    assert "upgraded" in wordpress.wp("upgrade", CANARY, str(new))
    dead = httpx.get(wordpress.url, timeout=30)
    assert dead.status_code == 500 and report_of(dead.text) is None, (dead.status_code, dead.text[-1500:])

    status = await client.status(site)  # the guard answers on the dead site: it loads before every plugin
    assert status.kept_versions("plugin", CANARY) == ["1.0"] and status.plugins[CANARY].version == "1.1"

    innocent_out = await client.probe(site, [INNOCENT])
    assert not innocent_out.up and innocent_out.status == 500
    assert "canary_undefined_function" in innocent_out.fatal["message"] and innocent_out.fatal["file"] == CANARY
    canary_out = await client.probe(site, [CANARY])
    assert canary_out.up and canary_out.left_out == [CANARY]
    assert httpx.get(wordpress.url, timeout=30).status_code == 500  # a probe leaves the site as it was

    assert (await client.pause(site, [CANARY])).paused == [CANARY]
    up = httpx.get(wordpress.url, timeout=30)
    assert up.status_code == 200 and "Hello from Guard test" in up.text and "canary" not in up.text
    assert (await client.status(site)).plugins[CANARY].active  # paused, not switched off: the option is as stored

    assert "deactivated" in wordpress.wp("deactivate", CANARY)  # what the dashboard's switch-off does on the child
    assert (await client.unpause(site, [CANARY])).paused == []
    restored = await client.restore(site, "plugin", CANARY, "1.0")
    assert restored.installed == "1.0"
    assert "activated" in wordpress.wp("activate", CANARY)
    back = httpx.get(wordpress.url, timeout=30)
    assert back.status_code == 200 and "canary 1.0" in back.text
    after = await client.status(site)
    assert after.plugins[CANARY].version == "1.0" and after.plugins[CANARY].active and after.paused == []


async def test_forged_expired_replayed_misdirected_and_oversized_requests_get_the_ordinary_page(
        wordpress: WordPressSite, guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    paused = (await client.status(site)).paused

    def pause_now(**changes: object) -> bytes:
        fields = {"ts": int(time.time()), "plugins": [INNOCENT]} | changes
        return envelope(fields.pop("site", wordpress.url), "pause", **fields)  # type: ignore[arg-type]

    refused = {
        "forged": signed_body(STRANGER, pause_now()),
        "expired": signed_body(KEY, pause_now(ts=int(time.time()) - 3600)),
        "from the future": signed_body(KEY, pause_now(ts=int(time.time()) + 3600)),
        "another site": signed_body(KEY, pause_now(site="https://elsewhere.example/")),
        "unsigned": json.dumps({"envelope": base64.urlsafe_b64encode(pause_now()).decode(), "signature": ""}).encode(),
        "oversized": json.dumps({"envelope": "A" * 9000, "signature": "B"}).encode(),
    }
    for why, body in refused.items():
        page = post(wordpress, body)
        assert report_of(page.text) is None, why
        assert "Hello from Guard test" in page.text or page.status_code == 500, why
    replayed = signed_body(KEY, envelope(wordpress.url, "status"))
    assert report_of(post(wordpress, replayed).text) is not None
    assert report_of(post(wordpress, replayed).text) is None  # the same nonce twice: the ordinary page
    assert (await client.status(site)).paused == paused  # nothing was done


async def test_names_are_checked_against_what_is_installed(guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    for names in (["../../wp-config.php"], ["nothing/here.php"], ["fleet-guard/../../x.php"]):
        with pytest.raises(GuardRefused, match="installed plugins"):
            await client.pause(site, names)
    with pytest.raises(GuardRefused, match="no kept version"):
        await client.restore(site, "plugin", "../../etc/passwd", "1.0")


async def test_a_guard_built_with_another_key_stays_silent(guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    with pytest.raises(GuardSilent, match="no guard answered"):
        await GuardClient(client.http, FleetKeys(STRANGER)).status(site)
    rotated = GuardClient(client.http, FleetKeys(STRANGER, previous=KEY))  # the fleet rotated: the old key answers
    assert (await rotated.status(site)).key == "previous"


def test_the_loader_sits_in_mu_plugins(wordpress: WordPressSite) -> None:
    loader = wordpress.content / "mu-plugins" / "fleet-guard-loader.php"
    assert loader.is_file() and str(wordpress.guard_data) in loader.read_text()
    assert f"'{public_key_text(KEY)}'" in Path(wordpress.content / "plugins" / "fleet-guard" / "keys.php").read_text()


async def test_a_corrupt_kept_version_is_not_put_back(wordpress: WordPressSite,
                                                      guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    installed = (await client.status(site)).plugins[INNOCENT].version
    newer = f"{installed}.1"
    release = plugin_zip(wordpress.root / "zips" / f"innocent-{newer}.zip", "innocent", {
        "innocent.php": f"<?php\n/*\nPlugin Name: Innocent\nVersion: {newer}\n*/\n"})
    assert "upgraded" in wordpress.wp("upgrade", INNOCENT, str(release))
    manifest = json.loads((wordpress.guard_data / "keep" / "manifest.json").read_text())
    [kept] = [entry for entry in manifest[f"plugin:{INNOCENT}"] if entry["version"] == installed]
    with open(wordpress.guard_data / "keep" / kept["file"], "ab") as archive:
        archive.write(b"bit rot")
    with pytest.raises(GuardRefused, match="corrupt"):
        await client.restore(site, "plugin", INNOCENT, installed)
    assert (await client.status(site)).plugins[INNOCENT].version == newer  # left as it was


async def test_an_unwritable_must_use_folder_is_said_at_activation_and_in_the_status(
        wordpress: WordPressSite, guard: tuple[GuardClient, GuardSite]) -> None:
    client, site = guard
    must_use = wordpress.content / "mu-plugins"
    assert "deactivated" in wordpress.wp("deactivate", "fleet-guard/fleet-guard.php")  # its loader goes with it
    shutil.rmtree(must_use)
    must_use.write_text("a file where the must-use folder should be")  # what root cannot be refused by chmod
    try:
        said = wordpress.wp("activate", "fleet-guard/fleet-guard.php")
        assert "activated" in said and "problem: the must-use plugins folder" in said
        status = await client.status(site)
        assert status.mode == "plugin" and "loader is missing" in status.unusable
        with pytest.raises(GuardRefused, match="must-use loader is missing"):
            await client.pause(site, [INNOCENT])
    finally:
        must_use.unlink()
        wordpress.wp("deactivate", "fleet-guard/fleet-guard.php")
        wordpress.wp("activate", "fleet-guard/fleet-guard.php")
    assert (await client.status(site)).unusable is None
