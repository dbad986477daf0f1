"""pandas aggregation of run summaries into the report data, for the whole fleet or one client."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, date, datetime

import numpy as np
import pandas as pd

from fleet.model.keys import offered_key
from fleet.model.summary import (
    DRY_RUN_RULE,
    ApprovalRecord,
    ContainmentStatus,
    Incident,
    NightHold,
    Outcome,
    SiteAlarm,
    Summary,
    UpdateType,
)
from fleet.model.vocabulary import (
    LEFT_OUT,
    OUTCOME_ORDER,
    Voice,
    client_voice,
    count,
    last_syncs,
    operator_voice,
    planned_from,
    said_outcome,
)
from fleet.rules.policy import Rule
from fleet.rules.reconcile import NOT_VERIFIED
from reporting.history import as_utc
from reporting.model import (
    CLIENT_NOT_VERIFIED,
    SITE_STATUS_TITLES,
    TYPE_TITLES,
    AgainstDryRun,
    Alarm,
    BreakdownRow,
    Checks,
    DeferredGroup,
    Headline,
    HoldRow,
    IncidentRow,
    NotDoneGroup,
    NotDoneRow,
    PluginFailure,
    ReportData,
    Rows,
    SiteProblem,
    TrendRow,
    UpdatedItem,
    UpdatedSite,
)
from reporting.rows import DryRun, ItemRow, PastRun, SiteRow, TrendItem
from reporting.vulnerability_section import vulnerability_rows, vulnerability_section

ITEM_COLUMNS = [
    "site_id", "site_name", "site_url", "client", "type", "slug", "name",
    "from_version", "to_version", "outcome", "reason", "rule", "until", "suspect",
]  # fmt: skip
TREND_COLUMNS = ["client", "type", "slug", "name", "outcome"]
NO_CLIENT = ""
MAX_ALARMS = 20  # broken sites shown in full at the top, the rest folded; the headline counts them all
MAX_PLUGINS = 15  # plugin versions that failed, shown in full (the worst first), the rest folded
MAX_NAMED = 20  # sites named in a sentence, the rest folded
RunStamp = Summary | PastRun  # what a trend row names a run by: its id and start
ATTEMPTED = frozenset({Outcome.updated, Outcome.failed, Outcome.unchanged, Outcome.unknown,
                       Outcome.not_switched_on})
_SPACE = re.compile(r"\s+")


def clean(value: object, limit: int = 300) -> str:
    """Untrusted text made safe to lay out: no control or format characters, one line, bounded length.

    Escaping for each format is the templates' job; this only keeps a value from breaking the layout.
    """
    if value is None:
        return ""
    text = "".join(c if unicodedata.category(c) not in ("Cc", "Cf") else " " for c in str(value))
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def items_frame(items: list[ItemRow]) -> pd.DataFrame:
    """One row per item, outcome and type as categoricals so that every table shows all of them. The outcome is
    the one the words count (`said_outcome`: a dry run's items it would apply are `updated`, "would update")."""
    values = {column: [getattr(item, column) for item in items] for column in ITEM_COLUMNS}
    values["outcome"] = [said_outcome(item.outcome, item.rule) for item in items]
    frame = pd.DataFrame(values, columns=ITEM_COLUMNS)
    frame["outcome"] = pd.Categorical(frame["outcome"], categories=list(Outcome))
    frame["type"] = pd.Categorical(frame["type"], categories=list(UpdateType))
    frame["client"] = frame["client"].fillna(NO_CLIENT)
    optional = ["from_version", "to_version", "reason", "rule", "until"]
    frame[optional] = frame[optional].astype(object).where(frame[optional].notna(), None)
    return frame


def trend_frame(items: list[TrendItem]) -> pd.DataFrame:
    """An earlier run's items, only what the trends count, every column categorical (a few bytes a row)."""
    values = {column: [getattr(item, column) for item in items] for column in TREND_COLUMNS}
    values["outcome"] = [said_outcome(item.outcome, item.rule) for item in items]
    frame = pd.DataFrame(values, columns=TREND_COLUMNS)
    frame["client"] = frame["client"].fillna(NO_CLIENT)
    return frame.astype({"type": pd.CategoricalDtype(list(UpdateType)), "outcome": pd.CategoricalDtype(list(Outcome)),
                         "client": "category", "slug": "category", "name": "category"})  # fmt: skip


def outcome_counts(frame: pd.DataFrame) -> dict[Outcome, int]:
    counts = frame["outcome"].value_counts()
    return {outcome: int(counts.get(outcome, 0)) for outcome in OUTCOME_ORDER}


def _breakdown(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    return pd.crosstab(frame[by], frame["outcome"], dropna=False).reindex(columns=list(Outcome), fill_value=0)


def by_type(frame: pd.DataFrame) -> list[BreakdownRow]:
    table = _breakdown(frame, "type").reindex(list(UpdateType), fill_value=0)
    return [
        BreakdownRow(TYPE_TITLES[kind], None, {o: int(table.at[kind, o]) for o in OUTCOME_ORDER})
        for kind in UpdateType
        if table.loc[kind].sum()
    ]


def by_client(frame: pd.DataFrame, sites: list[SiteRow]) -> list[BreakdownRow]:
    site_counts = pd.Series([site.client or NO_CLIENT for site in sites], dtype=object).value_counts()
    table = _breakdown(frame, "client") if len(frame) else pd.DataFrame(columns=list(Outcome))
    names = sorted(set(table.index) | set(site_counts.index), key=lambda n: (n == NO_CLIENT, n.casefold()))
    table = table.reindex(names, fill_value=0)
    return [
        BreakdownRow(
            clean(name) if name else "(no client)",
            int(site_counts.get(name, 0)),
            {o: int(table.at[name, o]) for o in OUTCOME_ORDER},
        )
        for name in names
    ]


def plugin_tally(frame: pd.DataFrame, *, per_version: bool = True) -> pd.DataFrame:
    """Attempted and failed updates of each plugin (version), with its name; tallies of several runs add up."""
    attempted = frame[(frame["type"] == UpdateType.plugin) & frame["outcome"].isin(ATTEMPTED)]
    return (
        attempted.assign(
            version=attempted["to_version"].fillna("") if per_version else "",
            is_failed=attempted["outcome"] == Outcome.failed,
        )
        .groupby(["slug", "version"], observed=True)
        .agg(name=("name", "first"), attempted=("is_failed", "size"), failed=("is_failed", "sum"))
        .reset_index()
    )


def worst_plugins(tally: pd.DataFrame, limit: int | None = None) -> list[PluginFailure]:
    """The plugins (versions) that failed, highest failure rate first (the first `limit`, or all)."""
    table = tally[tally["failed"] > 0]
    table = table.assign(rate=table["failed"] / table["attempted"])
    table = table.sort_values(["rate", "failed", "name"], ascending=[False, False, True])
    return [
        PluginFailure(clean(row.name, 80), clean(row.version, 40), int(row.attempted), int(row.failed))
        for row in (table if limit is None else table.head(limit)).itertuples()
    ]


def plugin_failures(frame: pd.DataFrame, limit: int) -> Rows[PluginFailure]:
    """Failure rate of each plugin version across the sites it was attempted on, every one that failed; the
    worst `limit` first in full."""
    return Rows.split(worst_plugins(plugin_tally(frame)), limit)


def plugin_trend(window: list[tuple[RunStamp, pd.DataFrame]], limit: int) -> list[PluginFailure]:
    """Failure rate of each plugin over the trend window, from each run's tally (no frame of every run's rows)."""
    tallies = pd.concat([plugin_tally(frame, per_version=False) for _, frame in window], ignore_index=True)
    combined = tallies.groupby(["slug", "version"], observed=True).agg(
        name=("name", "first"), attempted=("attempted", "sum"), failed=("failed", "sum")
    )
    return worst_plugins(combined.reset_index(), limit)


def _version(value: object) -> str:
    return clean(value, 40) if isinstance(value, str) and value else "—"


def not_verified(frame: pd.DataFrame) -> pd.Series:
    """The updated items only the dashboard's answer says were updated (the site stopped answering after)."""
    return (frame["outcome"] == Outcome.updated) & frame["reason"].fillna("").str.startswith(NOT_VERIFIED)


def updated_sites(frame: pd.DataFrame, limit: int, *, client: bool = False) -> Rows[UpdatedSite]:
    """Every updated item, grouped by site: the first `limit` items shown in full, the rest folded (a site may
    start in one and end in the other); one updated but not verified says so and why (a client reads why in plain
    words). One pass over the sorted rows: a fleet of 10,000 sites has tens of thousands."""
    updated = frame.assign(unverified=not_verified(frame))
    updated = updated[updated["outcome"] == Outcome.updated].sort_values(["site_name", "site_id", "type", "name"])
    parts: tuple[list[UpdatedSite], list[UpdatedSite]] = ([], [])
    site_id = None
    names: dict[object, str] = {}  # each name and version cleaned once, and shared by every row that has it
    versions: dict[object, str] = {}

    def once(said: dict[object, str], value: object, tidy: Callable[[object], str]) -> str:
        if value not in said:
            said[value] = tidy(value)
        return said[value]

    for number, row in enumerate(updated.itertuples(index=False)):
        part = parts[number >= limit]
        if not part or row.site_id != site_id:
            part.append(UpdatedSite(clean(row.site_name, 120), clean(row.site_url, 200), []))
            site_id = row.site_id
        why = (CLIENT_NOT_VERIFIED if client else clean(row.reason, 400)) if row.unverified else ""
        part[-1].items.append(UpdatedItem(row.type, once(names, row.name, lambda v: clean(v, 120)),
                                          once(versions, row.from_version, _version),
                                          once(versions, row.to_version, _version), bool(row.suspect), why))
    return Rows(*parts)


def _why(row: object, with_rule: bool) -> str:
    parts = [clean(row.reason, 300), f"rule: {clean(row.rule, 80)}" if with_rule and row.rule is not None else ""]
    return " · ".join(part for part in parts if part)


def held_in_plain_words(hold: NightHold) -> str:
    """Why the nights hold a version, for a client: what happened and when, never the other site nor its error.

    The stored reasons are `fleet.state.holds.bad_versions`' ("broke SITE: what was seen", "failed on N sites:
    error")."""
    when = f"{hold.since:%d %b %Y}"
    failed = re.match(r"failed on (\d+) sites", hold.reason)
    if failed:
        return f"it failed to install on {failed[1]} sites on {when}"
    if hold.reason.startswith("broke "):
        return f"it broke a website it was installed on, on {when}"
    return f"it caused a problem on another website on {when}"


NEXT_RELEASE = "we will install the next release once it is out."
SKIPPED_NEXT_STEP = {
    "offline": "The site could not be reached: its updates are tried again next night.",
    "disconnected": "The site could not be reached: its updates are tried again next night.",
    "suspended": "Maintenance of this site is paused: its updates wait until it is resumed.",
    "child_too_old": "The site's maintenance plugin (MainWP Child) is too old to take updates: they wait until "
                     "it is updated.",
}
HELD_NEXT_STEP = {  # by the rule that held it (a policy hold and a night's hold have their own words)
    Rule.rolled_back: f"It failed to install on this website before and was undone: {NEXT_RELEASE}",
    Rule.rolled_back_elsewhere: f"It failed to install on another website we maintain: {NEXT_RELEASE}",
    "broken_tonight": "It caused a problem on another website tonight: it waits until we have looked into it.",
    Rule.approval: "It waits for our go-ahead: it is installed once we have approved it.",
}


def deferral_in_plain_words(cause: str) -> str:
    """Why a site was left alone (`fleet.rules.windows`: a window, a blackout, a day already maintained), in a
    client's words."""
    if cause.startswith("blackout: "):
        return f"No maintenance by agreement ({clean(cause.removeprefix('blackout: '), 120)})"
    if cause.startswith("outside its maintenance window"):
        return "Outside the agreed maintenance times"
    if cause.startswith("already maintained"):
        return "Already maintained in this maintenance window"
    return "The agreed maintenance time ended before it was reached"


def deferred_in_plain_words(reason: str | None) -> str:
    """A deferred item for a client: why, and when it is next due (the reason carries the next opening in the
    client's own time)."""
    cause, _, opens = (reason or "").partition("; next window opens ")
    return (f"{deferral_in_plain_words(cause)}: done when the maintenance times next come round"
            + (f" ({clean(opens, 60)})." if opens else "."))


def next_step(row: object, held: dict[tuple[str, str, str], str], statuses: dict[int, str]) -> str:
    """Why an item was not installed and what happens next, in a client's words: no error codes, no rule names,
    no other client's site (`held`: each held version's why, in plain words; `statuses`: each site's status)."""
    hold = held.get((str(row.type), row.slug, row.to_version or ""))
    if row.outcome == Outcome.skipped:
        return SKIPPED_NEXT_STEP.get(statuses.get(row.site_id, ""), SKIPPED_NEXT_STEP["disconnected"])
    if row.outcome == Outcome.deferred:
        return deferred_in_plain_words(row.reason)
    if row.outcome == Outcome.delayed:
        return "A new release: we install it once it has been out a few days."
    if row.outcome == Outcome.held:
        if row.rule == Rule.night_hold:
            return (f"Held back on every site we maintain: {hold or 'it caused a problem on another website'}. "
                    f"We will install the next release once it is out.")
        if row.rule in HELD_NEXT_STEP:
            return HELD_NEXT_STEP[row.rule]
        reason = clean(row.reason, 300).removeprefix("held: ")  # the policy's hold: the operator's own words
        then = "it is installed when the hold ends" if row.until else "it is installed once we lift the hold"
        return f"Held back on purpose{': ' + reason if reason else ''}; {then}."
    if hold is not None:
        return f"Not installed. This version is held back on every site we maintain ({hold}); {NEXT_RELEASE}"
    if row.outcome == Outcome.unknown:
        return "We could not confirm that it was installed: it is checked, and tried again if needed, next night."
    return "Not installed: it will be tried again next night."


def not_done(frame: pd.DataFrame, limit: int, voice: Voice, *, client: bool = False,
             held: dict[tuple[str, str, str], str] | None = None,
             statuses: dict[int, str] | None = None) -> list[NotDoneGroup]:
    """Every item not updated, by its word (attention first), with why: the same item with the same reason on
    several sites is one row that names them, the first `limit` rows of a word in full. A client reads what happens
    next instead of the dashboard's error (see `next_step`), and its ignored and excluded items as one sentence
    (`left_out_sentence`)."""
    groups = []
    for term in voice.ordered():
        rows = frame[frame["outcome"].isin(voice.outcomes(term))]
        if rows.empty or term == voice.done or (client and term == LEFT_OUT):
            continue
        grouped: dict[tuple, NotDoneRow] = {}
        for row in rows.sort_values(["type", "name", "site_name", "site_id"]).itertuples():
            why = next_step(row, held or {}, statuses or {}) if client else _why(row, with_rule=True)
            key = (row.type, row.slug, row.from_version, row.to_version, why, row.until)
            if key not in grouped:
                grouped[key] = NotDoneRow([], row.type, clean(row.name, 120), _version(row.from_version),
                                          _version(row.to_version), why, row.until)
            grouped[key].sites.append(clean(row.site_name, 120))
        ordered = sorted(grouped.values(), key=lambda r: (-len(r.sites), r.name.casefold(), r.why))
        groups.append(NotDoneGroup(term, len(rows), Rows.split(ordered, limit)))
    return groups


def left_out_sentence(frame: pd.DataFrame) -> str:
    """Ignored and excluded items for a client: counts in one sentence, in its word (empty when there are none)."""
    rows = frame[frame["outcome"].isin(client_voice().outcomes(LEFT_OUT))]
    if rows.empty:
        return ""
    return (f"{LEFT_OUT.title} {len(rows)} (on {count(rows['site_id'].nunique(), 'site')}): kept back by agreement "
            "or by our maintenance policy.")


CLIENT_CHECK_WORDS = {  # what a client reads of a site that needs attention: never the check's own error
    "unhealthy": "It did not answer as it should after the updates: we have been alerted and are looking into it.",
    "incident": "Its uptime monitor has an open incident: we are looking into it.",
    "unverified": "We could not confirm after the updates that it answers as it should: we are looking into it.",
}


def site_checks(sites: list[SiteRow], limit: int, *, client: bool = False,
                states: dict[int, str] | None = None, broken: frozenset[int] = frozenset()) -> Checks:
    """The health checks; a site's state word is what it is after the night (`states`: the broken sites' own, such
    as "down, unreachable by the dashboard"), never "online" for a site that fails its check. A client reads what
    happens next instead of the check's error. A site the night broke (`broken`) is never counted healthy, even
    contained and answering its check again: the report that says it broke says it once."""
    checked = [site for site in sites if site.check is not None]
    problems = []
    for site in sorted(sites, key=lambda s: (s.site_name.casefold(), s.site_id)):
        check = site.check
        trouble = site.status != "online" or (check is not None and (not check.healthy or check.open_incidents
                                                                      or check.unverified))
        if not trouble:
            continue
        issue = ""
        if client:
            if site.status != "online":
                issue = SKIPPED_NEXT_STEP.get(site.status, SKIPPED_NEXT_STEP["disconnected"])
            else:
                issue = CLIENT_CHECK_WORDS["unhealthy" if not check.healthy else
                                           "unverified" if check.unverified else "incident"]
        elif check is not None:
            issue = (check.error or check.probe_error or ("site reported offline" if check.online is False else "")
                     or check.unverified or "")
        state = SITE_STATUS_TITLES.get(site.status, clean(site.status.replace("_", " "), 40))
        if site.status == "online" and check is not None and not check.healthy:
            state = (states or {}).get(site.site_id, "down")
        elif site.status == "online" and check is not None and check.unverified:
            state = "not verified"
        problems.append(
            SiteProblem(
                clean(site.site_name, 120),
                clean(site.site_url, 200),
                "" if client else state,
                check.http_code if check else None,
                check.response_ms if check else None,
                clean(issue, 300),
                check.open_incidents if check else 0,
            )
        )
    return Checks(
        checked=len(checked),
        healthy=sum(1 for site in checked if site.check.healthy and site.site_id not in broken),
        open_incidents=sum(site.check.open_incidents for site in checked),
        problems=Rows.split(problems, limit),
    )


def alarms(found: list[SiteAlarm], client: str | None, holds: list[NightHold] = ()) -> list[Alarm]:
    """The alarms of the whole fleet, or of one client's sites (without the operator's dashboard link); each says
    which of its suspects the stored `holds` hold."""
    held = {(hold.type, hold.slug, hold.version) for hold in holds}
    return [
        Alarm(clean(alarm.site_name, 120), clean(alarm.site_url, 200),
              clean(alarm.saw, 300) if client is None else "",  # what a check saw is the operator's
              clean(alarm.dashboard_page, 300) if client is None and alarm.dashboard_page else None,
              [UpdatedItem(s.type, clean(s.name or s.slug, 120), _version(s.from_version), _version(s.to_version),
                           True) for s in alarm.suspects],
              [f"{clean(s.name or s.slug, 120)} {_version(s.to_version)}" for s in alarm.suspects
               if offered_key(s) in held],
              clean(alarm.containment.headline, 200) if alarm.containment and alarm.containment.headline != "broken"
              else "",
              clean(alarm.containment.next_steps, 400) if alarm.containment else "",
              alarm.site_id)
        for alarm in found
        if client is None or alarm.client == client
    ]


def incident_rows(incidents: list[Incident], today: date) -> list[IncidentRow]:
    """The open incidents (down first, then the oldest) and those closed tonight."""
    def cause(incident: Incident) -> str:
        found = [incident.culprit] if incident.culprit else incident.suspects
        named = "; ".join(f"{clean(s.name or s.slug, 120)} {_version(s.from_version)} → {_version(s.to_version)}"
                          for s in found[:10])
        return f"{'culprit' if incident.culprit else 'suspects'}: {named}" if named else ""

    ordered = sorted(incidents, key=lambda i: (not i.is_open, not i.down, i.opened_at, i.id))
    return [IncidentRow(incident.id, clean(incident.site_name, 120), clean(incident.site_url, 200),
                        clean(incident.headline, 300), incident.age_days(today), incident.opened_at.date(),
                        clean(incident.opened_by, 60), cause(incident), clean(incident.done, 600),
                        clean(incident.next_steps, 400), clean(incident.last_look, 300),
                        clean(incident.dashboard_page, 300) if incident.dashboard_page else None,
                        incident.is_open and incident.down, not incident.is_open)
            for incident in ordered]


def hold_rows(holds: list[NightHold], today: date) -> list[HoldRow]:
    return [HoldRow(clean(f"{hold.item}@{hold.version}", 200), clean(hold.name or hold.slug, 120), hold.type,
                    clean(hold.version, 40), clean(hold.reason, 300), hold.since, max(0, hold.age_days(today)),
                    hold.kind.value, clean(hold.ends, 300))
            for hold in holds]


def trend_rows(history: list[tuple[RunStamp, pd.DataFrame]]) -> list[TrendRow]:
    return [
        TrendRow(clean(summary.run_id, 60), as_utc(summary.started_at).date(), outcome_counts(frame))
        for summary, frame in history
    ]


def client_rows(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Where each client's rows are, found once (rather than one scan of the whole fleet per client). Positions,
    not frames: a client's frame is taken when its report is built and goes with it, so nothing accumulates."""
    return {str(name): rows for name, rows in frame.groupby("client", sort=False, observed=True).indices.items()}


def deferred_groups(sites: list[SiteRow], max_rows: int, *, client: bool = False) -> list[DeferredGroup]:
    """Deferred sites grouped by their reason (the window or the blackout), soonest opening first, each naming
    every site (the first `max_rows` in full); a client reads the reason in plain words."""
    groups: dict[str, list[SiteRow]] = {}
    for site in sites:
        if site.deferred:
            groups.setdefault(site.deferred, []).append(site)
    found = [
        DeferredGroup(reason=deferral_in_plain_words(reason) if client else clean(reason, 300),
                      sites=Rows.split((clean(site.site_name, 120) for site in members), max_rows),
                      opens_at=min((as_utc(s.opens_at) for s in members if s.opens_at), default=None))
        for reason, members in groups.items()
    ]
    return sorted(found, key=lambda group: (group.opens_at is None, group.opens_at or datetime.max.replace(tzinfo=UTC)))


def approval_sentence(approval: ApprovalRecord | None) -> str | None:
    """One sentence on the night's approval gate, for the operator."""
    if approval is None:
        return None
    if approval.timed_out:
        return (f"{count(approval.items, 'update')} waited for approval and nobody answered before the timeout: "
                "they stay held.")
    who = clean(approval.answered_by or "the approver", 120)

    def were(number: int) -> str:
        return "was" if number == 1 else "were"

    return (f"{approval.approved} of {count(approval.items, 'update')} that needed approval {were(approval.approved)} "
            f"approved by {who}; {approval.skipped} {were(approval.skipped)} not and stay held.")


def revived_sites(sites: list[SiteRow]) -> list[str]:
    """The sites the dashboard had given up on as known offline that answered a check tonight and were
    maintained again (without anyone running `fleet check`)."""
    return [clean(site.site_name or site.site_url, 120) for site in sites if site.revived]


def revived_sentence(revived: int, *, client: bool = False) -> str | None:
    """The sentence that names the `revived` sites (their names follow it); a client reads it without the
    dashboard's terms."""
    if not revived:
        return None
    were = "was" if revived == 1 else "were"
    if client:
        return (f"{count(revived, 'site')} that could not be reached on earlier nights answered tonight and "
                f"{were} maintained again")
    return (f"{count(revived, 'site')} the dashboard kept as known offline answered a check tonight and {were} "
            "maintained again")


def against_dry_run(dry: DryRun, items: pd.DataFrame) -> AgainstDryRun:
    """What became tonight of each item the dry run would update, and what tonight updated that it would not
    have (the operator's words: the night's `items`, a real run's, for the whole fleet)."""
    voice = operator_voice()
    would = {(item.site_id, str(item.type), item.slug) for item in dry.items if item.rule == DRY_RUN_RULE}
    rows = items[["site_id", "type", "slug", "outcome"]].itertuples(index=False)
    tonight = {(int(site_id), str(type_), slug): Outcome(outcome) for site_id, type_, slug, outcome in rows}
    found = {key: tonight[key] for key in would if key in tonight}
    instead: dict[Outcome, list[int]] = {}
    for (site_id, _, _), outcome in found.items():
        if outcome is not Outcome.updated:
            instead.setdefault(outcome, []).append(site_id)
    return AgainstDryRun(
        at=as_utc(dry.started_at), planned_from=last_syncs(dry.last_sync), would=len(would),
        updated=sum(1 for outcome in found.values() if outcome is Outcome.updated),
        instead=[(voice.term(outcome), len(instead[outcome]), len(set(instead[outcome])))
                 for outcome in OUTCOME_ORDER if outcome in instead],
        gone=len(would) - len(found),
        unplanned=sum(1 for key, outcome in tonight.items() if outcome is Outcome.updated and key not in would),
    )


def build_report(
    summary: Summary,
    window: list[tuple[RunStamp, pd.DataFrame]],
    sites: list[SiteRow],
    *,
    client: str | None = None,
    max_rows: int = 100,
    vulnerability_items: list[ItemRow] | None = None,
) -> ReportData:
    """The data of one report: the whole fleet (`client=None`) or only the named client's sites, in its words
    (the operator's, a dry run's, or a client's: `fleet.model.vocabulary`).

    `window` is the trend window, oldest first and ending with this run, each frame (and `sites`) already scoped
    to `client`; a dry run's items it would apply are already counted as `updated` (`items_frame`).
    Every list is whole; its first rows are shown in full (the rest folded in the HTML, only counted in the text
    and Markdown): `max_rows` updated items, a quarter of that per not-done outcome and for the sites named in a
    window's group, half of it for the sites to check and those already down.
    A client reads nothing internal: no error, rule, run id, failure rate or other client's site.
    `vulnerability_items`: the items the vulnerability feed classed as more than routine (`vulnerability_rows`); by
    default those of `summary.items`.
    """
    items = window[-1][1]
    is_client = client is not None
    voice = client_voice() if is_client else operator_voice(summary.dry_run)
    checks = site_checks(sites, max(10, max_rows // 2), client=is_client, states={
        alarm.site_id: clean(alarm.containment.headline, 80) for alarm in summary.broken
        if alarm.containment is not None and alarm.containment.status is ContainmentStatus.unreachable},
        broken=frozenset(alarm.site_id for alarm in summary.broken))
    problems: list[str] = []
    if not is_client:
        problems = [clean(error, 500) for error in summary.errors]
        problems += [
            f"Cohort {clean(c.name, 80)} {c.status}" + (f": {clean(c.reason)}" if c.reason else "")
            for c in summary.cohorts
            if c.status != "completed"
        ]
    broken = alarms(summary.broken, client, summary.holds)
    revived = revived_sites(sites)
    return ReportData(
        client=clean(client, 120) if is_client else None,
        run_id=clean(summary.run_id, 60),
        started_at=as_utc(summary.started_at),
        finished_at=as_utc(summary.finished_at),
        dry_run=summary.dry_run,
        dashboard=clean(summary.dashboard, 200) if not is_client and summary.dashboard else None,
        headline=Headline(
            voice=voice,
            sites=len(sites),
            sites_updated=int(items.loc[items["outcome"] == Outcome.updated, "site_id"].nunique()),
            items=len(items),
            by_outcome=outcome_counts(items),
            checked=checks.checked,
            healthy=checks.healthy,
            open_incidents=checks.open_incidents,
            broken=len(broken),
            unusable=sum(1 for site in sites if site.status != "online"),
            client=is_client,
            not_verified=int(not_verified(items).sum()),
        ),
        updated=updated_sites(items, max_rows, client=is_client),
        not_done=not_done(items, max(10, max_rows // 4), voice, client=is_client,
                          held={(str(hold.type), hold.slug, hold.version): held_in_plain_words(hold)
                                for hold in summary.holds},
                          statuses={site.site_id: site.status for site in sites}),
        left_out=left_out_sentence(items) if is_client else "",
        plugin_failures=Rows() if is_client else plugin_failures(items, MAX_PLUGINS),  # fleet rates: the operator's
        checks=checks,
        by_type=by_type(items),
        by_client=by_client(items, sites) if not is_client and len(items) else [],
        trends=trend_rows(window) if len(window) > 1 else [],
        plugin_trend=plugin_trend(window, 10) if len(window) > 1 and not is_client else [],
        problems=problems,
        broken=Rows.split(broken, MAX_ALARMS),
        already_down=Rows.split(alarms(summary.already_down, client), max(10, max_rows // 2)),
        night_holds=hold_rows(summary.holds, as_utc(summary.started_at).date()) if not is_client else [],
        incidents=incident_rows(summary.incidents, as_utc(summary.finished_at).date()) if not is_client else [],
        deferred=deferred_groups(sites, max(10, max_rows // 4), client=is_client),
        approval=approval_sentence(summary.approval) if not is_client else None,
        revived=revived_sentence(len(revived), client=is_client),
        revived_sites=Rows.split(revived, MAX_NAMED),
        planned_from=planned_from(summary.last_sync) if summary.dry_run else "",
        vulnerabilities=vulnerability_section(summary, vulnerability_rows(summary.items) if vulnerability_items is None
                                              else vulnerability_items, client=client, tidy=clean),
    )
