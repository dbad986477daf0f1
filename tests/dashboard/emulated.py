"""Test helpers for the emulator: fast retry settings and the ground-truth admin routes."""

from __future__ import annotations

from typing import Any

from tests.local_http import LOCAL_HTTP

NAMESPACES = ("svc", "mainwp")
FAST_RETRIES = {"retry_initial": 0.005, "retry_cap": 0.02, "max_attempts": 8}


class GroundTruth:
    """The emulator's admin routes (`/__emulator__/...`): what is really there, and the fault switches."""

    def __init__(self, server: Any) -> None:
        self.root = server.credentials["base_url"].rstrip("/").removesuffix("/wp-json")
        self.headers = {"X-Emulator-Token": server.credentials["admin_token"]}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        response = LOCAL_HTTP.request(method, f"{self.root}/__emulator__{path}", json=body, headers=self.headers)
        response.raise_for_status()
        return response.json()

    def state(self, *site_ids: int) -> dict[str, Any]:
        query = f"?site_ids={','.join(map(str, site_ids))}" if site_ids else ""
        return self._call("GET", f"/state{query}")

    def options(self, **values: Any) -> dict[str, Any]:
        return self._call("POST", "/options", values)

    def faults(self, profile: str | dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", "/faults", {"profile": profile})

    def fault_counts(self) -> dict[str, int]:
        return self._call("GET", "/faults")["counts"]
