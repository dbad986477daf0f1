"""What an ability handler works with: the emulator, the caller, and the dashboard's resolution rules for
sites, clients and tags, the destructive-operation rule and pagination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emulator.abilities.catalog import Ability
from emulator.abilities.errors import AbilityError
from emulator.jobs import CHILD_OUTDATED, child_outdated
from emulator.records import Client, Site, Tag
from emulator.scope import EmulatorScope

if TYPE_CHECKING:
    from emulator.services import Emulator

DEFAULT_CONFIRM_MESSAGE = "This is a destructive operation. Set confirm: true or use dry_run: true for preview."


@dataclass
class AbilityContext(EmulatorScope):
    """One ability run: the ability and where the caller reached the dashboard."""

    emulator: Emulator
    ability: Ability
    site_root: str  # `http://host:port`, for the absolute URLs some answers carry

    def fail(self, suffix: str, message: str, status: int | None = 400, **data: Any) -> AbilityError:
        return AbilityError(self.code(suffix), message, status, **data)

    def module_required(self, module: str) -> None:
        if module not in self.emulator.config.modules:
            label = {"cost-tracker": "Cost Tracker", "logs": "Logs"}.get(module, module)
            raise self.fail("module_not_available", f"The {label} module is not active.", 501)

    def status_url(self, job_id: str) -> str:
        """Where the real dashboard points (a route it never registered: it answers 404)."""
        return f"{self.site_root}/wp-json/{self.ns}/v2/jobs/{job_id}"

    # ---- resolution ----------------------------------------------------------------------------------------

    def site_not_found(self, identifier: Any) -> AbilityError:
        text = str(identifier).strip()
        if text.isdigit():
            return self.fail("site_not_found", f"No site found with ID {int(text)}.", 404)
        return self.fail("site_not_found", f'No site found matching "{text}".', 404)

    def resolve_site(self, identifier: Any) -> Site:
        if identifier is None or str(identifier).strip() == "":
            raise self.fail("invalid_input", "Site identifier is required.", 400)
        site = self.state.find_site(identifier)
        if site is None:
            raise self.site_not_found(identifier)
        return site

    def outdated_child(self, site: Site) -> AbilityError | None:
        """`check_child_version`'s refusal (400, with the site's id) while the dashboard's sync record of the
        site's child version is below 4.0.0; None: the site passes."""
        if not child_outdated(site):
            return None
        return self.fail("child_outdated", CHILD_OUTDATED, 400, site_id=site.id)

    def current_child_site(self, identifier: Any) -> Site:
        """The site, refused by `check_child_version` as the abilities that list or change what is on its child
        refuse it (after the site's resolution, before their own checks)."""
        site = self.resolve_site(identifier)
        refused = self.outdated_child(site)
        if refused is not None:
            raise refused
        return site

    def resolve_sites(self, identifiers: list[Any] | None) -> tuple[list[Site], list[dict[str, Any]]]:
        """Each identifier on its own (empty = every site); failures as `{identifier, code, message, status}`."""
        if not identifiers:
            return list(self.state.sites.values()), []
        sites: list[Site] = []
        seen: set[int] = set()
        failures: list[dict[str, Any]] = []
        for identifier in identifiers:
            site = self.state.find_site(identifier)
            if site is None:
                error = self.site_not_found(identifier)
                failures.append({"identifier": identifier, "code": error.code, "message": error.message,
                                 "status": 404})
            elif site.id not in seen:
                seen.add(site.id)
                sites.append(site)
        return sites, failures

    def resolve_client(self, identifier: Any) -> Client:
        client = self.state.find_client(identifier)
        if client is None:
            text = str(identifier).strip()
            message = (f"No client found with ID {int(text)}." if text.isdigit()
                       else f'No client found with email "{text}".')
            raise self.fail("client_not_found", message, 404)
        return client

    def resolve_tag(self, tag_id: int) -> Tag:
        tag = self.state.tags.get(int(tag_id))
        if tag is None:
            raise self.fail("tag_not_found", f"No tag found with ID {int(tag_id)}.", 404)
        return tag

    # ---- rules ---------------------------------------------------------------------------------------------

    def destructive_mode(self, args: dict[str, Any]) -> str:
        """"dry_run" or "confirm"; both, or neither, is an error. Check before resolving the target."""
        if args.get("dry_run") and args.get("confirm"):
            raise self.fail("invalid_input", "Cannot specify both dry_run and confirm.", 400)
        return "dry_run" if args.get("dry_run") else ("confirm" if args.get("confirm") else "")

    def require_confirm(self, mode: str, message: str = DEFAULT_CONFIRM_MESSAGE) -> None:
        if mode == "":
            raise self.fail("confirmation_required", message, 400)


def page_of(items: list[Any], page: int, per_page: int) -> list[Any]:
    start = (max(page, 1) - 1) * per_page
    return items[start : start + per_page]
