"""`fleet guard keygen [--rotate]`, `build` and `status`, and `fleet emulator serve --guard`: the private key only
in the home's .env (private, never printed), rotation keeping the old key for the guards built before it, the zip
carrying the public key, and each site's guard as the night will find it."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest
from dotenv import dotenv_values
from typer.testing import CliRunner

from cli.app import app
from cli.demo import dashboard_environment
from dashboard.home import fleet_home
from emulator.config import EmulatorConfig
from emulator.guard import arm_sites
from emulator.testing import EmulatorServer
from guard.keys import load_keys
from guard.signing import public_key_text

runner = CliRunner()


def keygen(*args: str) -> str:
    done = runner.invoke(app, ["guard", "keygen", *args])
    assert done.exit_code == 0, done.output
    return done.output


def test_keygen_keeps_the_private_key_in_the_homes_env_and_rotation_keeps_the_old_one() -> None:
    said = keygen()
    env = fleet_home() / ".env"
    values = dotenv_values(env)
    first = values["FLEET_GUARD_KEY"]
    assert stat.S_IMODE(env.stat().st_mode) == 0o600 and first not in said
    assert public_key_text(load_keys().current) in said
    refused = runner.invoke(app, ["guard", "keygen"])
    assert refused.exit_code == 2 and "--rotate" in refused.output and dotenv_values(env)["FLEET_GUARD_KEY"] == first
    rotated = keygen("--rotate")
    values = dotenv_values(env)
    assert values["FLEET_GUARD_PREVIOUS_KEY"] == first and values["FLEET_GUARD_KEY"] != first
    assert "previous key" in rotated and first not in rotated and values["FLEET_GUARD_KEY"] not in rotated
    assert "previous=yes" in repr(load_keys()) and values["FLEET_GUARD_KEY"] not in repr(load_keys())


def test_build_puts_the_current_public_key_in_the_zip(tmp_path: Path) -> None:
    refused = runner.invoke(app, ["guard", "build", "--out", str(tmp_path)])
    assert refused.exit_code == 2 and "fleet guard keygen" in refused.output
    keygen()
    keygen("--rotate")
    built = runner.invoke(app, ["guard", "build", "--out", str(tmp_path)])
    assert built.exit_code == 0, built.output
    with zipfile.ZipFile(tmp_path / "fleet-guard-1.0.0.zip") as archive:
        names = set(archive.namelist())
        keys = archive.read("fleet-guard/keys.php").decode()
    assert {"fleet-guard/fleet-guard.php", "fleet-guard/guard.php", "fleet-guard/loader.php",
            "fleet-guard/keys.php", "fleet-guard/readme.txt", "fleet-guard/uninstall.php"} <= names
    current, previous = load_keys().current, load_keys().previous
    assert f"'{public_key_text(current)}'" in keys and public_key_text(previous) not in keys


def test_status_says_per_site_whether_the_night_can_count_on_its_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    keygen()
    with EmulatorServer(EmulatorConfig(sites=4, seed=3, time_scale=1e-6)) as server:
        state = server.emulator.state
        armed = arm_sites(state, [load_keys().public], "3")
        state.sites[armed[1]].guard["version"] = "0.9.0"
        state.sites[armed[2]].guard["removed"] = True
        for name, value in dashboard_environment(server.credentials).items():
            monkeypatch.setenv(name, value)
        done = runner.invoke(app, ["guard", "status", "--json"])
    assert done.exit_code == 1, done.output  # some cannot be counted on
    rows = {row["site_id"]: row for row in json.loads(done.output[: done.output.rindex("]") + 1])}
    assert rows[armed[0]]["usable"] and rows[armed[0]]["answers"] == "yes" and rows[armed[0]]["version"] == "1.0.0"
    assert not rows[armed[1]]["usable"] and "older than 1.0.0" in rows[armed[1]]["verdict"]
    assert rows[armed[2]]["answers"] == "no" and not rows[armed[2]]["usable"]
    unarmed = next(site_id for site_id in rows if site_id not in armed)
    assert rows[unarmed]["verdict"] == "cannot revive it: no guard answers"
    assert "the night can count on the guard of 1; 3 it cannot revive" in done.output


@pytest.mark.usefixtures("prefect_harness")
async def test_the_keys_can_live_in_a_prefect_secret_block_and_are_read_inside_a_night(tmp_path: Path) -> None:
    from guard.keys import generate
    from guard.settings import GuardSettings

    made = generate(tmp_path, block="fleet-guard-test-keys")
    assert not (tmp_path / ".env").exists()  # nothing on disk
    settings = GuardSettings(guard_key_block="fleet-guard-test-keys", _env_file=None)
    assert public_key_text(load_keys(settings).current) == made.public  # read from a running event loop
    rotated = generate(tmp_path, rotate=True, block="fleet-guard-test-keys")
    keys = load_keys(settings)
    assert rotated.previous_public == made.public and public_key_text(keys.previous) == made.public


def test_emulator_serve_guard_arms_all_none_or_the_first_n_sites_with_the_homes_key() -> None:
    import typer

    from cli.commands.emulator import arm_guards
    from emulator.app import create_app

    state = create_app(EmulatorConfig(sites=4, seed=3)).state.emulator.state
    with pytest.raises(typer.BadParameter, match="fleet guard keygen"):
        arm_guards(state, "2")
    keygen()
    assert arm_guards(state, "none") == [] and not any(site.guard for site in state.sites.values())
    assert arm_guards(state, "2") == sorted(state.sites)[:2]
    assert all(site.guard["keys"] == [load_keys().public] for site in list(state.sites.values())[:2])
    assert arm_guards(state, "all") == sorted(state.sites)
    with pytest.raises(typer.BadParameter, match="all, none or a number"):
        arm_guards(state, "some")
