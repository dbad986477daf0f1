"""What the benchmarks against the real MainWP lab (`../shared/lab`) share: its dashboard's settings from the lab's
credentials, the lab's shell scripts run, and the canary's releases served as WordPress fetches packages."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import httpx

CHECKOUT = Path(__file__).resolve().parent.parent
FLEET = str(CHECKOUT / ".venv" / "bin" / "fleet")  # the checkout's own `fleet`, as `make` installs it


def sh(command: str, env: dict[str, str]) -> str:
    """A lab script; its output, or a RuntimeError with what it printed."""
    done = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command}: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return done.stdout


def lab_dashboard(lab: Path, policy: Path) -> dict[str, str]:
    """The FLEET_* settings of the lab's dashboard (its read-write key, its application password) with `policy`."""
    credentials = json.loads((lab / "credentials.json").read_text())
    return {
        "FLEET_BASE_URL": credentials["dashboard"]["base_url"].rstrip("/") + "/wp-json",
        "FLEET_NAMESPACE": "mainwp", "FLEET_API_KEY": credentials["mainwp_api_keys"]["read_write"]["bearer_token"],
        "FLEET_ABILITIES_USER": credentials["application_password"]["user"],
        "FLEET_ABILITIES_PASSWORD": credentials["application_password"]["password"],
        "FLEET_POLICY_FILE": str(policy)}


def lab_home(lab: Path, name: str, **settings: str) -> tuple[Path, dict[str, str]]:
    """A FLEET_HOME of one benchmark's own (its .env: the lab's dashboard, reports under reports/, a policy with
    min_age_days 0, as the canary's releases are minutes old, and `settings`) and the environment its commands run
    in; the canary's zips go to its zips/."""
    home = Path(tempfile.mkdtemp(prefix=f"{name}-"))
    (home / "policy.yaml").write_text("min_age_days: 0\n")
    values = lab_dashboard(lab, home / "policy.yaml") | {"FLEET_REPORT_DIR": str(home / "reports"), **settings}
    (home / ".env").write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return home, {**os.environ, "LAB_DIR": str(lab), "FLEET_HOME": str(home)}


def sync_children(lab: Path, env: dict[str, str]) -> None:
    """Both children synced; each reconnected first (MainWP refuses a site whose last sync failed as "child
    outdated" until a reconnect), so that a run left broken sites behind does not stop the next."""
    settings = lab_dashboard(lab, Path("unused"))
    for site_id in (1, 2):
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"{settings['FLEET_BASE_URL']}/mainwp/v2/sites/{site_id}/reconnect", timeout=60,
                       headers={"Authorization": f"Bearer {settings['FLEET_API_KEY']}"})
    sh(f"php {lab}/bin/php/lab-rest.php {lab}/run/keys.json sync", env)


def serve_canary(scripts: Path, zips: Path, versions: tuple[str, ...]) -> subprocess.Popen[bytes]:
    """The canary's releases zipped into `zips` and served on 127.0.0.1 port 80 (WordPress fetches a package from
    127.0.0.1 only on 80, 443, 8080 or the site's own port); the server's process, to terminate."""
    zips.mkdir(parents=True, exist_ok=True)
    for version in versions:
        with zipfile.ZipFile(zips / f"lab-canary-{version}.zip", "w") as archive:
            source = scripts / "canary" / "src" / version
            for path in sorted(source.rglob("*")):
                archive.write(path, path.relative_to(source))
    return subprocess.Popen([sys.executable, "-m", "http.server", "80", "--bind", "127.0.0.1", "--directory",  # noqa: S603
                             str(zips)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def lab_arguments(description: str, out: Path) -> tuple[Path, Path, Path]:
    """The lab benchmarks' command line: the built lab (`--lab`, default `LAB_DIR`), the lab's scripts
    (`--scripts`, default ../shared/lab) and where the JSON goes (`--out`); resolved."""
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lab", type=Path, default=Path(os.environ.get("LAB_DIR", "/work/lab")))
    parser.add_argument("--scripts", type=Path, default=root.parent / "shared" / "lab")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args()
    return args.lab.resolve(), args.scripts.resolve(), args.out
