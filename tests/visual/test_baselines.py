"""The nights' memory of the pages, without a browser: a site's last shots are carried only while nothing was
applied since and the shots' extent is the same; its masks are carried whatever was applied."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fleet.model.summary import UpdateType
from fleet.state.visual_baselines import KeptPage, VisualBaselines, unchanged_since
from fleet.visual.diff import learn_mask, load_mask, save_mask
from tests.visual.test_diff import page

PLUGIN = (UpdateType.plugin, "forms/forms.php")
THEME = (UpdateType.theme, "astra")


def test_only_versions_listed_again_as_they_were_carry_the_shots() -> None:
    last_night = {PLUGIN: "1.2", THEME: "4.0"}
    assert unchanged_since(last_night, {PLUGIN: "1.2", THEME: "4.0", (UpdateType.core, "wordpress"): "6.5"})
    assert not unchanged_since(last_night, {PLUGIN: "1.3", THEME: "4.0"}), "updated since, and offered again"
    assert not unchanged_since(last_night, {THEME: "4.0"}), "updated since: no longer listed"


def test_a_kept_site_gives_its_shots_while_nothing_changed_and_its_masks_always(tmp_path: Path) -> None:
    shot = page(tmp_path / "home.after.png")
    mask = save_mask(np.eye(4, dtype=bool), tmp_path / "home.mask.png")
    store = VisualBaselines(tmp_path / "state", "https://dash.example/wp-json")
    store.keep("7-shop.example", {PLUGIN: "1.2"}, [KeptPage("home", "https://shop.example/", "desktop", shot, mask,
                                                            ("old error",))], "2 screens")
    carried = store.kept("7-shop.example", {PLUGIN: "1.2"}, "2 screens")[("home", "desktop")]
    assert carried.shot is not None and carried.shot.read_bytes() == shot.read_bytes()
    assert (load_mask(carried.mask) == np.eye(4, dtype=bool)).all() and carried.console_errors == ("old error",)
    changed = store.kept("7-shop.example", {PLUGIN: "1.3"}, "2 screens")[("home", "desktop")]
    assert changed.shot is None and changed.mask.is_file(), "one shot tonight, judged with the mask learned"
    assert store.kept("7-shop.example", {PLUGIN: "1.2"}, "full") == {}, "shots of another extent do not compare"
    elsewhere = VisualBaselines(tmp_path / "state", "https://other.example/wp-json")
    assert elsewhere.kept("7-shop.example", {}, "2 screens") == {}, "another dashboard's site 7 is another site"


def test_a_mask_learns_what_moved_between_healthy_shots(tmp_path: Path) -> None:
    before = page(tmp_path / "a.png", height=64, width=64)
    after = page(tmp_path / "b.png", height=64, width=64, boxes=((0, 0, 4, 4, 0),))  # a rotated banner's corner
    known = np.zeros((4, 4), dtype=bool)
    known[3, 3] = True
    grown = learn_mask(known, before, after)
    assert grown[3, 3] and grown[0, 0] and grown[1, 1] and not grown[2, 2]
