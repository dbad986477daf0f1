"""The vocabulary: a word for every outcome in every voice, a dry run's "would update", counts with their unit,
and one closing line for `fleet nightly` and `fleet demo`."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cli.commands.demo import closing_line
from cli.commands.selection import print_summary
from cli.demo import DemoResult
from fleet.model.summary import DRY_RUN_RULE, Item, LastSync, Outcome, SiteReport, Summary, UpdateType
from fleet.model.vocabulary import (
    LIST_SEPARATOR,
    NOT_INSTALLED,
    WOULD_UPDATE,
    client_voice,
    count,
    operator_voice,
    planned_from,
    run_line,
    said_counts,
)
from reporting.model import TERM_COLORS

START = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)


def test_every_outcome_has_a_word_in_every_voice_and_no_word_holds_the_list_separator():
    for voice in (operator_voice(), operator_voice(dry_run=True), client_voice()):
        assert [voice.term(outcome) for outcome in Outcome]  # a new outcome without words fails here
        assert sorted(voice.order, key=list(Outcome).index) == list(Outcome)
        for term in voice.ordered():
            assert term.key in TERM_COLORS, term  # its badge and its bar in the charts
            assert LIST_SEPARATOR.strip() not in term.word and term.word == term.word.lower()
            assert term.title[0].isupper() and term.title[1:] == term.word[1:]
    words = [operator_voice().term(outcome).word for outcome in Outcome]
    assert len(set(words)) == len(words)  # the operator and the logs: one word per outcome
    assert operator_voice(dry_run=True).done == WOULD_UPDATE and operator_voice().done.word == "updated"
    assert {client_voice().term(o) for o in (Outcome.failed, Outcome.unknown, Outcome.unchanged)} == {NOT_INSTALLED}


def test_counts_name_their_unit_for_one_or_many():
    assert (count(1, "site"), count(0, "site"), count(40, "item")) == ("1 site", "0 sites", "40 items")


ROOT = Path(__file__).resolve().parents[2]
# The packages whose texts are ours (emulator/ says what the real MainWP dashboard says, dashboard/ what its API does)
OWN_TEXTS = ("cli", "fleet", "flows", "orchestration", "reporting", "deployments", "tasks", "vulnfeed")


def hedged_texts(source: str) -> list[tuple[int, str]]:
    """Each string constant of `source` (an f-string's literal parts included) that says "(s)", with its line;
    docstrings are prose for the reader of the code, not texts anyone is shown, and are left to it."""
    tree = ast.parse(source)
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "(s)" in node.value
            and id(node) not in docstrings]


def test_no_text_of_ours_counts_with_an_s_in_brackets():
    """A count says its unit for one or many (`count(2, "site")`: "2 sites"), never "2 site(s)": no log line, CLI
    line, exception or report text of the project's own packages says "(s)", counted or not."""
    assert sorted(hedged_texts('"""A docstring about function(s)."""\nf"{n} site(s) of {m}" + "%d item(s)"')) == [
        (2, " site(s) of "), (2, "%d item(s)")]
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for package in OWN_TEXTS
             for path in sorted((ROOT / package).rglob("*.py")) for line, text in hedged_texts(path.read_text())]
    assert found == [], "\n".join(found)


def night(*, dry_run: bool, outcomes: list[tuple[Outcome, str | None]], sites: int = 2) -> Summary:
    items = [Item(site_id=n % sites + 1, site_url="https://a.example", site_name="A", type=UpdateType.plugin,
                  slug=f"p{n}", name=f"P{n}", outcome=outcome, rule=rule) for n, (outcome, rule) in enumerate(outcomes)]
    return Summary(run_id="20261126-020000-abcd1234", started_at=START, finished_at=START, dry_run=dry_run,
                   items=items, counts=Summary.count(items),
                   sites=[SiteReport(site_id=n, site_url="https://a.example", site_name="A")
                          for n in range(1, sites + 1)],
                   last_sync=LastSync(oldest=START - timedelta(hours=20), newest=START - timedelta(minutes=5))
                   if dry_run else None)


def test_a_dry_run_counts_what_it_would_apply_as_would_update_not_as_excluded():
    dry = night(dry_run=True, outcomes=[(Outcome.excluded, DRY_RUN_RULE)] * 3 + [(Outcome.excluded, "semver"),
                                                                                  (Outcome.ignored, "ignore_list")])
    assert dry.counts.by_outcome[Outcome.excluded] == 4  # summary.json keeps the contract's outcomes
    assert said_counts(dry) == {Outcome.updated: 3, Outcome.excluded: 1, Outcome.ignored: 1}
    assert run_line(dry) == ("dry run 20261126-020000-abcd1234: 5 items on 2 sites: would update 3; ignored 1; "
                             "excluded 1; planned from the dashboard's last syncs (between 25 Nov 2026 06:00 UTC and "
                             "26 Nov 2026 01:55 UTC), so the real night may differ")
    may_differ = "so the real night may differ"
    assert planned_from(None) == f"planned from the dashboard's last sync (its time unknown), {may_differ}"
    from orchestration.artifacts import headline  # the run's markdown artifact in the Prefect UI

    assert "5 items found: would update 3; ignored 1; excluded 1; planned from" in headline(dry)
    same = LastSync(oldest=START, newest=START + timedelta(seconds=20))
    assert planned_from(same) == f"planned from the dashboard's last sync (26 Nov 2026 02:00 UTC), {may_differ}"


def test_fleet_nightly_and_fleet_demo_close_with_one_line_and_the_gateway_only_when_it_timed_out(tmp_path: Path,
                                                                                                  capsys):
    real = night(dry_run=False, outcomes=[(Outcome.updated, None), (Outcome.failed, None), (Outcome.unknown, None)])
    line = "run 20261126-020000-abcd1234: 3 items on 2 sites: updated 1; failed 1; no answer 1"
    real.write(tmp_path)
    print_summary(str(tmp_path / "summary.json"))
    assert capsys.readouterr().out.splitlines() == [line, f"summary: {tmp_path / 'summary.json'}"]
    assert closing_line(DemoResult(run_dir=tmp_path, summary=real)) == line
    assert closing_line(DemoResult(run_dir=tmp_path, summary=real, gateway_timeouts=3)) == (
        f"{line}; the dashboard's gateway timed out 3 calls")
