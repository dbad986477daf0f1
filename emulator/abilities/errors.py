"""The WP_Error an ability run answers with: the REST layer's `RestError`, plus WordPress's `additional_data`."""

from __future__ import annotations

from typing import Any

from emulator.rest import RestError


class AbilityError(RestError):
    """`status=None` is an error without a status: WordPress sends it as 500.

    `additional_data` carries the earlier data when WordPress adds a second status to the same error (the run
    endpoint's permission phase does that: an unknown site answers 403 with `additional_data:[{status:404}]`).
    """

    def __init__(self, code: str, message: str, status: int | None = 400,
                 additional_data: list[dict[str, Any]] | None = None, **data: Any) -> None:
        super().__init__(code, message, status, **data)
        self.additional_data = additional_data

    def body(self) -> dict[str, Any]:
        body = super().body()
        if self.additional_data is not None:
            body["additional_data"] = self.additional_data
        return body

    def in_permission_phase(self, logged_in: bool = True) -> AbilityError:
        """The same error as the run endpoint's permission check reports it (401/403, old data kept aside)."""
        previous = [{"status": self.status, **self.extra}] if self.status is not None else []
        return AbilityError(self.code, self.message, 403 if logged_in else 401, additional_data=previous)
