"""The run's blank Prefect database (tests/prefect_home.py), which every test server starts from."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from prefect.blocks.notifications import CustomWebhookNotificationBlock, SlackWebhook
from prefect.blocks.system import Secret

from cli.local_prefect import BLOCK_TYPES_REGISTERED
from tests.conftest import BLANK_DATABASE


def test_the_blank_database_holds_prefects_block_types_so_its_servers_need_not_register_them() -> None:
    """Its servers start with `BLOCK_TYPES_REGISTERED`: without the types in the copy they would have none."""
    assert os.environ.get(next(iter(BLOCK_TYPES_REGISTERED))) == "false", "this process's servers skip registering"
    with contextlib.closing(sqlite3.connect(Path(os.environ[BLANK_DATABASE]))) as database:
        slugs = {slug for (slug,) in database.execute("SELECT slug FROM block_type")}
        schemas = database.execute("SELECT count(*) FROM block_schema").fetchone()[0]
        documents = database.execute("SELECT count(*) FROM block_document").fetchone()[0]

    wanted = {block.get_block_type_slug() for block in (Secret, SlackWebhook, CustomWebhookNotificationBlock)}
    assert wanted <= slugs, wanted - slugs
    assert schemas >= len(slugs) and documents == 0, "types and their schemas, no saved block"
