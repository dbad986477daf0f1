"""`fleet guard build`: the guard plugin's zip with the fleet's public key built in, ready for MainWP's bulk upload."""

from __future__ import annotations

import zipfile
from importlib.resources import files
from pathlib import Path

from guard.models import GUARD_VERSION

PLUGIN = "fleet-guard"
SOURCES = ("fleet-guard.php", "guard.php", "loader.php", "uninstall.php", "readme.txt")


def plugin_folder() -> Path:
    return Path(str(files("guard"))) / "plugin" / PLUGIN


def keys_php(public_keys: list[str]) -> str:
    listed = "".join(f"\t'{key}',\n" for key in public_keys)
    return ("<?php\n/** The fleet's Ed25519 public keys this guard accepts (written by `fleet guard build`). */\n"
            "if ( ! defined( 'ABSPATH' ) ) {\n\texit;\n}\nreturn array(\n" + listed + ");\n")


def build_zip(out: Path, public_keys: list[str]) -> Path:
    """Write `fleet-guard-<version>.zip` into `out` (a folder) or to `out` (a .zip path); returns its path."""
    if not public_keys or any(not key.isascii() or "'" in key or "\\" in key for key in public_keys):
        raise ValueError("the guard needs the fleet's public key(s), as base64")
    target = out if out.suffix == ".zip" else out / f"{PLUGIN}-{GUARD_VERSION}.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = plugin_folder()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in SOURCES:
            archive.write(folder / name, f"{PLUGIN}/{name}")
        archive.writestr(f"{PLUGIN}/keys.php", keys_php(public_keys))
    return target
