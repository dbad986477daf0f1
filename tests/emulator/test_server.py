"""Through real sockets: `EmulatorServer`, persistence across a restart, and `fleet emulator serve`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer, free_port


def test_state_survives_restart(tmp_path: Path) -> None:
    config = EmulatorConfig(namespace="svc", sites=12, seed=5, db=tmp_path / "dash.sqlite", time_scale=1e-6)
    with EmulatorServer(config) as server:
        creds = server.credentials
        headers = {"Authorization": "Bearer " + creds["api_keys"]["read_write"]}
        update = server.emulator.state.all_pending_updates(("plugin",))[0]
        site = server.emulator.state.sites[update.site_id]
        site.reachable = site.child_connected = True
        site.suspended = False
        with httpx.Client(base_url=server.base_url, headers=headers) as client:
            tag = client.post("/svc/v2/tags/add", json={"name": "kept"}).json()["data"]["id"]
            client.post(f"/svc/v2/updates/{update.site_id}/update/plugins", data={"slug": update.slug})
            token = client.post("/svc/v2/rest-api/add-key", data={"permissions": "read", "active": "1"}).json()["token"]
    credentials_file = tmp_path / "credentials.json"
    credentials_file.write_text(json.dumps(creds))
    with EmulatorServer(config.model_copy(update={"credentials_file": credentials_file})) as again:
        assert again.credentials["api_keys"] == creds["api_keys"]  # the database alone could not give them back
        assert again.credentials["application_password"] == creds["application_password"]
        with httpx.Client(base_url=again.base_url, headers={"Authorization": "Bearer " + token}) as client:
            assert client.get(f"/svc/v2/tags/{tag}").json()["data"]["name"] == "kept"
        assert again.emulator.state.sites[update.site_id].plugins[update.slug].version == update.new_version
    with EmulatorServer(config) as fresh:  # no credentials file: fresh bootstrap credentials, the old ones revoked
        assert fresh.credentials["api_keys"]["read_write"] != creds["api_keys"]["read_write"]
        with httpx.Client(base_url=fresh.base_url) as client:
            old = client.get("/svc/v2/sites/count", headers={"Authorization": "Bearer " + creds["api_keys"]["read"]})
            new = client.get("/svc/v2/sites/count",
                             headers={"Authorization": "Bearer " + fresh.credentials["api_keys"]["read"]})
            kept = client.get(f"/svc/v2/tags/{tag}", headers={"Authorization": "Bearer " + token})
        assert old.status_code == 401 and new.status_code == 200 and kept.status_code == 200


def test_the_database_holds_no_secret_in_clear_and_is_private(tmp_path: Path) -> None:
    db = tmp_path / "dash.sqlite"
    config = EmulatorConfig(namespace="svc", sites=3, seed=5, db=db, time_scale=1e-6)
    with EmulatorServer(config) as server:
        creds = server.credentials
        with httpx.Client(base_url=server.base_url,
                          headers={"Authorization": "Bearer " + creds["api_keys"]["read_write"]}) as client:
            added = client.post("/svc/v2/rest-api/add-key", data={"permissions": "read", "active": "1"}).json()
    assert db.stat().st_mode & 0o777 == 0o600
    secrets = [part for token in [*creds["api_keys"].values(), added["token"]] for part in token.split("==")]
    password = creds["application_password"]["password"]
    secrets += [password, password.replace(" ", ""), creds["v1"]["consumer_key"], creds["v1"]["consumer_secret"]]
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("dash.sqlite*"))
    assert stored and not [s for s in secrets if s.encode() in stored]


async def test_async_server_and_ground_truth_guard() -> None:
    async with EmulatorServer(EmulatorConfig(sites=3, namespace="mainwp")) as server, httpx.AsyncClient() as client:
        index = (await client.get(server.base_url + "/")).json()
        assert "mainwp/v2" in index["namespaces"]
        refused = await client.get(server.root_url + "/__emulator__/state")
        assert refused.status_code == 403
        truth = await client.get(
            server.root_url + "/__emulator__/state", headers={"X-Emulator-Token": server.credentials["admin_token"]}
        )
        assert truth.json()["site_count"] == 3


def test_cli_serve_prints_url_writes_credentials_and_stops(tmp_path: Path) -> None:
    """Default options imitate the product: the `mainwp` namespace, and the dashboard URL (the site root) given."""
    out = tmp_path / "creds.json"
    port = free_port()
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "fleet"),
            "emulator",
            "serve",
            "--port",
            str(port),
            "--sites",
            "20",
            "--credentials-out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith(f"http://127.0.0.1:{port}/wp-json")
        assert f"dashboard URL http://127.0.0.1:{port}," in line and "namespace mainwp" in line
        creds = json.loads(out.read_text())
        assert creds["dashboard_url"] == f"http://127.0.0.1:{port}"
        assert set(creds) == {
            "dashboard_url",
            "base_url",
            "namespace",
            "abilities_url",
            "api_keys",
            "v1",
            "application_password",
            "admin_token",
            "site_url_template",
            "time_scale",
            "vulnerability_feed",
        }
        count = httpx.get(
            creds["base_url"] + "/mainwp/v2/sites/count",
            headers={"Authorization": "Bearer " + creds["api_keys"]["read"]},
        )
        assert count.json() == {"count": 20}
        app_password = creds["application_password"]
        listed = httpx.get(creds["abilities_url"] + "/abilities", params={"per_page": 100},
                           auth=(app_password["username"], app_password["password"])).json()
        names = {a["name"].split("/")[0] for a in listed}
        assert names == {"mainwp", "core"}  # what the official MainWP MCP server looks for
        assert creds["site_url_template"] == f"http://127.0.0.1:{port}/__sites__/{{host}}/"
        assert creds["time_scale"] == 1.0  # the night's FLEET_TIME_SCALE against this emulator
        feed = httpx.get(creds["vulnerability_feed"], headers={"Authorization": f"Bearer {creds['admin_token']}"})
        assert feed.status_code == 200 and all("software" in record for record in feed.json().values())
        admin = {"X-Emulator-Token": creds["admin_token"]}
        truth = httpx.get(f"http://127.0.0.1:{port}/__emulator__/state", headers=admin)
        up = next(s for s in truth.json()["sites"].values() if s["front_end"]["status"] == "up")
        page = httpx.get(creds["site_url_template"].format(host=up["url"].split("://")[1].rstrip("/")))
        assert page.status_code == 200 and "<title>" in page.text and "critical error" not in page.text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0


async def test_in_process_lifespan_runs_part_two_jobs_for_queued_rest_calls() -> None:
    import asyncio

    from emulator.testing import InProcessEmulator

    lab = InProcessEmulator(EmulatorConfig(namespace="svc", sites=4, time_scale=1e-4))
    lab.emulator.state.set_option("svc_abilities_batch_threshold", 2)
    async with lab, lab.client(headers={"Authorization": "Bearer " + lab.credentials["api_keys"]["read_write"]}) as c:
        queued = (await c.post("/svc/v2/sites/sync")).json()
        assert queued["message"] == "Sync queued for background processing." and queued["total"] == 4
        for _ in range(200):
            if lab.emulator.state.jobs[queued["job_id"]]["status"] in ("completed", "failed"):
                break
            await asyncio.sleep(0.02)
        assert lab.emulator.state.jobs[queued["job_id"]]["status"] == "completed"
