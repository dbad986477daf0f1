"""What the night broke: a site healthy before the updates and failing after is an incident with suspects.

A site that already failed before the updates is reported apart ("was already down"), never blamed on the night.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from fleet.model.summary import Containment, ContainmentStatus, HealthCheck, Item, Outcome, SiteAlarm, Suspect
from fleet.model.vocabulary import count

# applied, or perhaps applied (no answer); an item that failed or did not move was never applied: not a suspect
# (a release that could not be switched on was installed: it is its break's culprit)
SUSPECT_OUTCOMES = (Outcome.updated, Outcome.unknown, Outcome.not_switched_on)  # in that order
SENT_OUTCOMES = (*SUSPECT_OUTCOMES, Outcome.failed, Outcome.unchanged)  # the night sent it: the site was touched


class NightFailure(RuntimeError):
    """A night that finished (summary and reports written) but must end Failed, so that nobody reads it as green.

    `args` are (message, summary path), so that the exception pickles and the caller still finds the summary.
    """

    def __init__(self, message: str, summary_path: str) -> None:
        super().__init__(message, summary_path)

    @property
    def summary_path(self) -> str:
        return self.args[1]

    def __str__(self) -> str:
        return self.args[0]


class SitesBrokenByRun(NightFailure):  # noqa: N818 - it names what happened, as Prefect's state message shows it
    """The night broke sites."""


def site_page(dashboard: str | None, site_id: int) -> str | None:
    """The site's page on a MainWP dashboard (`/wp-admin/admin.php?page=managesites&dashboard=ID`)."""
    if not dashboard:
        return None
    parts = urlsplit(dashboard)
    root = parts.path.rstrip("/").removesuffix("/wp-json")
    return urlunsplit((parts.scheme, parts.netloc, f"{root}/wp-admin/admin.php",
                       f"page=managesites&dashboard={site_id}", ""))


def judge_sites(
    items: list[Item], sites: list[tuple[int, str, str, str | None]], checks: dict[int, HealthCheck],
    dashboard: str | None, containments: dict[int, Containment] | None = None,
) -> tuple[list[SiteAlarm], list[SiteAlarm]]:
    """(broken by this run, already down), and the suspects flagged on `items` (they keep their outcome).

    `sites` are (id, url, name, client). Broken: the probe before the updates passed, and a probe after an update
    step failed (`containments`: what was done about it; a site contained since answers again) or the check after
    fails, and the night sent updates to the site. Suspects are the site's items applied or perhaps applied
    (`updated`, `unknown`; the failed ones only when nothing else was); a site broken after a step has that step's
    items as suspects, and a contained site its one culprit. Already down: the probe before the updates failed.
    """
    containments = containments or {}
    attempted: dict[int, list[Item]] = {}
    for item in items:
        if item.outcome in SENT_OUTCOMES:
            attempted.setdefault(item.site_id, []).append(item)
    broken, down = [], []
    for site_id, url, name, client in sites:
        check = checks.get(site_id)
        if check is None:
            continue
        alarm = SiteAlarm(site_id=site_id, site_url=url, site_name=name, client=client, saw="",
                          dashboard_page=site_page(dashboard, site_id))
        if check.before_ok is False:
            saw = (check.problem or "it fails its check") if not check.healthy else "it answers again after the night"
            down.append(alarm.model_copy(update={"saw": f"before the updates: {check.before_error}; after: {saw}"}))
        elif site_id in containments or (check.before_ok and not check.healthy and site_id in attempted):
            contained = containments.get(site_id)
            sent = attempted.get(site_id, [])
            # a failed upgrade can leave a site broken (WordPress's .maintenance left behind): then it is the suspect
            suspects = sorted([item for item in sent if item.outcome in SUSPECT_OUTCOMES] or sent,
                              key=lambda item: SENT_OUTCOMES.index(item.outcome))
            if contained is not None and contained.culprit is not None:
                culprit = contained.culprit
                suspects = [item for item in sent if (item.type, item.slug) == (culprit.type, culprit.slug)]
                if contained.status is ContainmentStatus.revived:  # the night put the version before it back
                    for item in suspects:
                        item.outcome = Outcome.failed
                        item.reason = (f"installed {culprit.to_version}, which killed the site at load; the night "
                                       f"put {culprit.from_version} back from its Fleet Guard's keep (revived)")
            elif contained is not None:  # the steps before it passed their probe: only its own items are suspects
                suspects = [item for item in suspects if item.type is contained.step]
            for item in suspects:
                item.suspect = True
                if contained is not None and contained.never_ran:  # installed, never ran: not an update
                    item.outcome, item.reason = Outcome.not_switched_on, contained.saw
            saw = check.problem if not check.healthy else ""
            if contained is not None:
                saw = "; ".join(part for part in (f"after the {contained.step.value} updates: {contained.saw}",
                                                  contained.detail, saw and f"after the night: {saw}") if part)
            broken.append(alarm.model_copy(update={"saw": saw or "it fails its check", "containment": contained,
                                                   "suspects": [
                Suspect(type=item.type, slug=item.slug, name=item.name, from_version=item.from_version,
                        to_version=item.to_version, outcome=item.outcome) for item in suspects]}))
    return broken, down


def broken_message(broken: list[SiteAlarm], run_id: str) -> str:
    """The flow run's failure message (the alert says it): the broken sites, each with its address, its suspects
    and the versions to restore, what to do and its dashboard page, in one line."""
    def said(alarm: SiteAlarm) -> str:
        suspects = ", ".join(f"{s.name or s.slug} {s.from_version or '?'} -> {s.to_version or '?'}"
                             for s in alarm.suspects)
        contained = alarm.containment
        state = f": {contained.headline}" if contained and contained.headline != "broken" else ""
        todo = f"; {contained.next_steps}" if contained and contained.next_steps else ""
        page = f"; dashboard: {alarm.dashboard_page}" if alarm.dashboard_page else ""
        return f"{alarm.site_name or alarm.site_url} {alarm.site_url} ({suspects}{state}{todo}{page})"

    named = "; ".join(said(alarm) for alarm in broken[:10])
    more = f" and {len(broken) - 10} more" if len(broken) > 10 else ""
    return f"run {run_id} broke {count(len(broken), 'site')}: {named}{more}"
