"""The registered abilities and their categories, as the real dashboard publishes them, in one namespace.

The data are copies of the real `GET /wp-abilities/v1/abilities?per_page=100` and `/categories` answers
(`emulator/data/abilities.json`, `ability-categories.json`); the namespace setting renames ability names,
category slugs and the error codes the descriptions mention, and nothing else.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

REAL_NAMESPACE = "mainwp"

# Abilities that need a dashboard module; with the module off they answer `{ns}_module_not_available` (501).
MODULE_OF_ABILITY = {
    "get-site-costs-v1": "cost-tracker",
    "get-client-costs-v1": "cost-tracker",
    "get-site-changes-v1": "logs",
}

# The spec names the job-status ability a POST; the real dashboard wants GET (read-only). Both are served.
EXTRA_METHODS = {"get-batch-job-status-v1": ("POST",)}


@dataclass(frozen=True, slots=True)
class Ability:
    name: str
    label: str
    description: str
    category: str
    input_schema: Any
    output_schema: Any
    annotations: dict[str, Any]
    show_in_rest: bool

    @property
    def short_name(self) -> str:
        """`list-sites-v1` for `svc/list-sites-v1`."""
        return self.name.split("/", 1)[1]

    @property
    def run_method(self) -> str:
        """The method WordPress core's `validate_request_method()` demands."""
        if self.annotations.get("readonly"):
            return "GET"
        if self.annotations.get("destructive") and self.annotations.get("idempotent"):
            return "DELETE"
        return "POST"

    @property
    def allowed_methods(self) -> tuple[str, ...]:
        return (self.run_method, *EXTRA_METHODS.get(self.short_name, ()))

    @property
    def module(self) -> str | None:
        return MODULE_OF_ABILITY.get(self.short_name) if not self.name.startswith("core/") else None

    def describe(self) -> dict[str, Any]:
        """The ability object of the listing (without `_links`)."""
        return {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "category": self.category,
            "input_schema": copy.deepcopy(self.input_schema),
            "output_schema": copy.deepcopy(self.output_schema),
            "meta": {"annotations": dict(self.annotations), "show_in_rest": self.show_in_rest},
        }


@dataclass(frozen=True, slots=True)
class Category:
    slug: str
    label: str
    description: str
    meta: Any

    def describe(self) -> dict[str, Any]:
        return {"slug": self.slug, "label": self.label, "description": self.description, "meta": self.meta}


class Catalog:
    """The 64 abilities (62 of the dashboard, 2 of WordPress core) and 7 categories, in registration order."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.abilities: dict[str, Ability] = {}
        for raw in _load("abilities.json"):
            ability = Ability(
                name=_rename(raw["name"], namespace),
                label=raw["label"],
                description=_rename_codes(raw["description"], namespace),
                category=_rename(raw["category"], namespace),
                input_schema=raw["input_schema"],
                output_schema=raw["output_schema"],
                annotations=dict(raw["meta"]["annotations"]),
                show_in_rest=raw["meta"].get("show_in_rest", True),
            )
            self.abilities[ability.name] = ability
        self.categories: dict[str, Category] = {}
        for raw in _load("ability-categories.json"):
            category = Category(
                slug=_rename(raw["slug"], namespace),
                label=raw["label"],
                description=raw["description"],
                meta=raw["meta"],
            )
            self.categories[category.slug] = category

    def get(self, name: str) -> Ability | None:
        ability = self.abilities.get(name)
        return ability if ability is not None and ability.show_in_rest else None

    def listed(self, category: str | None = None) -> list[Ability]:
        return [
            a for a in self.abilities.values() if a.show_in_rest and (category is None or a.category == category)
        ]


@cache
def catalog_for(namespace: str) -> Catalog:
    return Catalog(namespace)


@cache
def _load(filename: str) -> Any:
    return json.loads(resources.files("emulator").joinpath("data", filename).read_text(encoding="utf-8"))


def _rename(identifier: str, namespace: str) -> str:
    """`mainwp/x` -> `svc/x`, `mainwp-sites` -> `svc-sites`; core names stay."""
    for separator in ("/", "-"):
        prefix = REAL_NAMESPACE + separator
        if identifier.startswith(prefix):
            return namespace + separator + identifier[len(prefix) :]
    return identifier


def _rename_codes(text: str, namespace: str) -> str:
    return re.sub(rf"\b{REAL_NAMESPACE}_", f"{namespace}_", text)
