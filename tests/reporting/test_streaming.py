"""summary.json read and rewritten in bounded memory: the JSON stream, the rows, the deliveries, the charts."""

from __future__ import annotations

import gc
import io
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Delivery, Outcome, Summary
from fleet.model.vocabulary import OUTCOME_ORDER, operator_voice
from reporting import charts
from reporting.json_stream import ObjectStream
from reporting.model import PluginFailure, TrendRow
from reporting.rows import SummaryError, read_past, read_summary
from reporting.run_report import record_deliveries
from tests.reporting.builder import build_summary

DOCUMENT = {
    "name": 'a "quoted" } ] , : \\ string, ünïcödé, 😀 and 中文',
    "numbers": [0, -12, 3.25, 1e-07, 12345678901234567890, -0.5e3],
    "flags": [True, False, None],
    "items": [{"id": n, "tags": ["x" * n, {"deep": [n, n * 1.5]}]} for n in range(40)],
    "empty": {"list": [], "object": {}},
    "last": 42,
}


def as_bytes(document: object, indent: int | None = 2) -> bytes:
    return json.dumps(document, indent=indent, ensure_ascii=False).encode()


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 2])
def test_members_decode_like_json_and_echo_the_file_unchanged_whatever_the_chunk(chunk: int, indent: int | None):
    raw = as_bytes(DOCUMENT, indent) + b"\n"
    echo = io.StringIO()
    stream = ObjectStream(io.BytesIO(raw), echo=echo, chunk=chunk)
    decoded = {}
    for key in stream.members():
        if key == "items":
            decoded[key] = list(stream.elements())
        elif key != "flags":  # left alone: skipped, and still echoed
            decoded[key] = stream.value()
    assert decoded == {k: v for k, v in DOCUMENT.items() if k != "flags"}
    assert echo.getvalue().encode() == raw


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_a_member_is_replaced_and_members_appended(chunk: int):
    echo = io.StringIO()
    stream = ObjectStream(io.BytesIO(as_bytes(DOCUMENT)), echo=echo, chunk=chunk)
    for key in stream.members(append=lambda: ', "added": [1]'):
        if key == "numbers":
            stream.replace(lambda numbers: json.dumps(sum(numbers[:3])))
    assert json.loads(echo.getvalue()) == {**DOCUMENT, "numbers": -8.75, "added": [1]}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"run_id": "x", "started_at": ', "unexpected end of file"),
        ('{"run_id": "x", "started_at": "2026-11', "Unterminated string"),
        ('["not", "an", "object"]', "expected '{'"),
        ('{"a": 1} trailing', "unexpected text after the object"),
        ('{"a": 1 "b": 2}', "expected ','"),
        ('{"a" 1}', "expected ':'"),
        ("", "unexpected end of file"),
    ],
)
def test_broken_json_is_a_clear_error(text: str, problem: str):
    stream = ObjectStream(io.BytesIO(text.encode()), chunk=4)
    with pytest.raises(ValueError, match=f"invalid JSON: {problem}"):
        for _ in stream.members():
            pass


def test_rows_hold_what_the_models_hold(tmp_path: Path):
    summary = build_summary(date(2026, 11, 21))
    summary.write(tmp_path)
    rows = read_summary(tmp_path)
    fields = ["site_id", "site_url", "site_name", "client", "type", "slug", "name", "from_version", "to_version",
              "outcome", "reason", "rule", "until"]  # fmt: skip
    assert [[getattr(r, f) for f in fields] for r in rows.items] == [[getattr(i, f) for f in fields]
                                                                       for i in summary.items]  # fmt: skip
    assert [(r.site_name, r.status, r.check.healthy, r.check.open_incidents) for r in rows.sites] == [
        (s.site_name, s.status, s.check.healthy, s.check.open_incidents) for s in summary.sites
    ]
    assert rows.model_dump(exclude={"items", "sites"}) == summary.model_dump(exclude={"items", "sites"})
    past = read_past(tmp_path / "summary.json")
    assert (past.run_id, [i.outcome for i in past.items]) == (summary.run_id, [i.outcome for i in summary.items])


def test_a_broken_summary_names_the_file_and_the_fault(tmp_path: Path):
    summary = json.loads(build_summary(date(2026, 11, 21)).model_dump_json())
    summary["items"][3]["outcome"] = "exploded"
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SummaryError, match=r"summary\.json: items\[3\]\.outcome: Input should be .*, got 'exploded'"):
        read_summary(tmp_path)
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "invalid summary" in result.output
    assert "items[3].outcome" in result.output and "Traceback" not in result.output


def test_deliveries_are_appended_exactly_as_summary_write_would(tmp_path: Path):
    build_summary(date(2026, 11, 21)).write(tmp_path / "streamed")
    build_summary(date(2026, 11, 21)).write(tmp_path / "models")
    at = datetime(2026, 11, 21, 2, 40, tzinfo=UTC)
    batches = [
        [Delivery(report="operator", recipient="ops@agency.example", accepted=True, answer="250 ok", at=at)],
        [Delivery(report="Acme Dental", recipient="", accepted=False, answer="not sent: «no address»",
                  eml_path="/runs/x/client-acme.eml", at=at)],
    ]  # fmt: skip
    for deliveries in batches:
        record_deliveries(tmp_path / "streamed", deliveries)
        summary = Summary.read(tmp_path / "models")
        summary.deliveries += deliveries
        summary.write(tmp_path / "models")
    streamed = (tmp_path / "streamed" / "summary.json").read_bytes()
    assert streamed == (tmp_path / "models" / "summary.json").read_bytes()
    assert Summary.read(tmp_path / "streamed").deliveries == [*batches[0], *batches[1]]


def test_deliveries_are_added_to_a_summary_that_has_none_yet(tmp_path: Path):
    summary = json.loads(build_summary(date(2026, 11, 21)).model_dump_json())
    del summary["deliveries"]
    (tmp_path / "summary.json").write_text(json.dumps(summary, indent=2))
    delivery = Delivery(report="operator", recipient="ops@agency.example", accepted=True, answer="250 ok")
    record_deliveries(tmp_path, [delivery])
    assert Summary.read(tmp_path).deliveries == [delivery]


def test_a_chart_figure_is_freed_as_soon_as_its_png_is_made():
    trends = [TrendRow(f"r{n}", date(2026, 11, n + 1), {o: (n + i) % 4 for i, o in enumerate(OUTCOME_ORDER)})
              for n in range(5)]  # fmt: skip
    failures = [PluginFailure("Plugin $1", "", 10, 3)]
    gc.collect()
    for png in (charts.outcomes_per_night(trends, operator_voice()), charts.failure_rate_per_plugin(failures)):
        assert png.startswith(b"\x89PNG")
        assert not [o for o in gc.get_objects() if isinstance(o, Figure)]  # not even as garbage awaiting collection
    assert gc.isenabled()


def test_plugin_failure_counts_add_up_over_runs_like_one_table(nights: list[Path]):
    from reporting.aggregate import items_frame, plugin_trend, trend_frame

    frames = [trend_frame(read_past(night).items) for night in nights[:-1]]
    frames.append(items_frame(read_summary(nights[-1]).items))
    got = plugin_trend([(None, frame) for frame in frames], 10)
    counts: dict[str, list[int]] = {}
    for night in nights:
        for item in json.loads((night / "summary.json").read_text())["items"]:
            if item["type"] == "plugin" and item["outcome"] in ("updated", "failed", "unchanged", "unknown",
                                                               "not_switched_on"):
                tally = counts.setdefault(item["name"], [0, 0])
                tally[0] += 1
                tally[1] += item["outcome"] == Outcome.failed
    want = sorted(((n, a, f) for n, (a, f) in counts.items() if f), key=lambda t: (-t[2] / t[1], -t[2], t[0]))
    assert [(p.name, p.attempted, p.failed) for p in got] == want[:10] and got
