"""A real WordPress for the guard's tests: Debian's `wordpress` package (its core read-only in /usr/share/wordpress),
`php-cli`'s built-in server and a private MariaDB on a unix socket, with a content folder of the test's own.
Started once per test module; `missing()` says why it cannot be (the tests are then skipped with that reason)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import time
import zipfile
from pathlib import Path

import httpx

HERE = Path(__file__).parent / "wordpress"
CORE = Path("/usr/share/wordpress")
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
THEME = {"style.css": "/*\nTheme Name: Plain\nVersion: 1.0\n*/\n",
         "index.php": "<?php ?><!DOCTYPE html><html><head><title><?php bloginfo( 'name' ); ?></title>"
                      "<?php wp_head(); ?></head><body><h1>Hello from <?php bloginfo( 'name' ); ?></h1>"
                      "<?php wp_footer(); ?></body></html>\n"}


def missing() -> str | None:
    """Why a real WordPress cannot start here, or None."""
    if shutil.which("php") is None:
        return "php-cli is not installed (Debian: apt-get install php-cli php-mysql)"
    if not (CORE / "wp-settings.php").is_file():
        return "Debian's wordpress package is not installed (apt-get install wordpress)"
    if not Path(MARIADBD).is_file() or shutil.which("mariadb-install-db") is None:
        return "mariadb-server is not installed (apt-get install mariadb-server)"
    probe = subprocess.run(["php", "-r", "exit(function_exists('sodium_crypto_sign_verify_detached') && "
                            "function_exists('mysqli_connect') && class_exists('PharData') ? 0 : 1);"],
                           capture_output=True, check=False)
    if probe.returncode != 0:
        return "PHP lacks sodium, mysqli or Phar (Debian: php-cli and php-mysql have them)"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def plugin_zip(path: Path, folder: str, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{folder}/{name}", text)
    return path


class WordPressSite:
    """One WordPress: `url` is its home; `wp(...)` runs tests/guard/wordpress/wp.php on the server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.content = root / "wp-content"
        self.guard_data = root / "guard-data"
        self.socket = root / "db.sock"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.processes: list[subprocess.Popen] = []
        self.env = {**os.environ, "FLEET_TEST_WP": str(root)}

    def start(self) -> WordPressSite:
        db = self.root / "db"
        user = getpass.getuser()
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={db}", f"--user={user}", "--skip-test-db",
                        "--auth-root-authentication-method=normal"], check=True, capture_output=True)
        self._spawn([MARIADBD, "--no-defaults", f"--datadir={db}", f"--socket={self.socket}", "--skip-networking",
                     f"--user={user}", "--skip-grant-tables", "--skip-log-bin", "--innodb-buffer-pool-size=16M",
                     f"--pid-file={self.root / 'db.pid'}", f"--log-error={self.root / 'db.err'}"])
        self._wait(lambda: self.socket.exists(), "MariaDB")
        subprocess.run(["mariadb", "--no-defaults", "-S", str(self.socket), "-uroot", "-e",
                        "CREATE DATABASE wordpress"], check=True, capture_output=True)
        for folder in ("plugins", "themes/plain", "uploads"):
            (self.content / folder).mkdir(parents=True, exist_ok=True)
        for name, text in THEME.items():
            (self.content / "themes" / "plain" / name).write_text(text)
        self.guard_data.mkdir()
        (self.root / "site.json").write_text(json.dumps({
            "socket": str(self.socket), "url": self.url, "content": str(self.content),
            "guard_data": str(self.guard_data)}))
        assert "installed" in self.wp("install")
        # no opcache in the server: the tests change plugins from another process (`wp`), whose invalidation cannot
        # reach the server's cache, and for up to 2 s (opcache.revalidate_freq) it ran the plugin it had before (a
        # fatal release served as "canary 1.0", now and then). On a real site the update runs in the server's own
        # process and WordPress's upgrader invalidates what it wrote.
        self._spawn(["php", "-d", "opcache.enable=0", "-S", f"127.0.0.1:{self.port}", str(HERE / "router.php")])
        self._wait(self._answers, "php -S")
        return self

    def _spawn(self, command: list[str]) -> None:
        log = open(self.root / f"{Path(command[0]).name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.processes.append(subprocess.Popen(command, env=self.env, stdout=log, stderr=log, cwd=self.root))

    def _answers(self) -> bool:
        try:
            httpx.get(self.url, timeout=2)
        except httpx.HTTPError:
            return False
        return True

    @staticmethod
    def _wait(ready, what: str, seconds: float = 30) -> None:  # noqa: ANN001
        deadline = time.monotonic() + seconds
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start in {seconds} s")
            time.sleep(0.05)

    def wp(self, *args: str) -> str:
        """tests/guard/wordpress/wp.php on the server, as WP-CLI would run it; its output."""
        done = subprocess.run(["php", str(HERE / "wp.php"), *args], env=self.env, capture_output=True, text=True,
                              timeout=60, check=False)
        return done.stdout + done.stderr

    def install_plugin(self, zip_path: Path) -> None:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(self.content / "plugins")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
