"""`fleet demo`: the nightly flow against an embedded emulator, ending in a rendered report."""

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cli.demo import DemoResult, fresh_start, run_demo
from cli.errors import quiet_expected_tracebacks
from fleet.model.vocabulary import count, run_line

app = typer.Typer(help="Run the nightly flow against an embedded emulator and render the report.")


def own_prefect_home(output: Path) -> Path | None:
    """The demo's Prefect home under its output, so its ephemeral server shares no database with anything else
    (a shared ~/.prefect was locked by another process); an operator's PREFECT_API_URL or PREFECT_HOME wins."""
    if os.environ.get("PREFECT_API_URL") or os.environ.get("PREFECT_HOME"):
        return None
    home = (output / ".prefect").resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(home)
    return home


def closing_line(result: DemoResult) -> str:
    """`fleet nightly`'s closing line, and the gateway's timeouts of the night's own calls when there were any."""
    timeouts = result.gateway_timeouts
    return run_line(result.summary) + (f"; the dashboard's gateway timed out {count(timeouts, 'call')}" if timeouts
                                       else "")


@app.callback(invoke_without_command=True)
def demo(
    output: Annotated[Path, typer.Option(help="Directory for the run's summary, reports and .eml messages.")] = Path(
        "demo-output"
    ),
    sites: Annotated[int, typer.Option(min=1, max=10_000, help="Sites in the generated fleet.")] = 40,
    nights: Annotated[
        int, typer.Option(min=1, max=7, help="Nights run one after another (from the second, reports show trends).")
    ] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the generated fleet and of the faults.")] = 0,
    faults: Annotated[str, typer.Option(help="Fault profile: none, realistic, hostile or a file.")] = "realistic",
    time_scale: Annotated[float, typer.Option(min=0.0001, help="Multiplier of every dashboard delay.")] = 0.002,
    dashboards: Annotated[int, typer.Option(min=1, max=12, help="More than 1: the night over that many dashboards "
                                            "on a local Prefect server and work pool (maintain-dashboards).")] = 1,
    workers: Annotated[int, typer.Option(min=1, max=8, help="Workers of that pool (with --dashboards).")] = 2,
    keep_state: Annotated[bool, typer.Option("--keep-state", help="Start from what earlier demos left in OUTPUT "
                                             "(their holds, first-seen dates and runs) instead of fresh.")] = False,
) -> None:
    console = Console()
    if dashboards > 1:
        from cli.estate_demo import run_estate_demo

        run_estate_demo(output, dashboards=dashboards, workers=workers, sites=sites, faults=faults,
                        time_scale=time_scale, nights=nights, console=console)
        return
    home = own_prefect_home(output)
    if home:
        console.print(f"Prefect home for the demo: {home}", soft_wrap=True)
    if keep_state:
        console.print(f"Keeping what earlier demos left in {output.resolve()} (--keep-state): its holds and "
                      "first-seen dates shape tonight's plan.", soft_wrap=True)
    else:
        removed = fresh_start(output.resolve())
        console.print("Fresh state" + (f": removed {', '.join(removed)}" if removed else "") +
                      " (keep it with --keep-state).", soft_wrap=True)
    quiet_expected_tracebacks()  # a night that breaks sites is what the demo shows, not a bug
    console.print(f"Starting an emulated dashboard with {sites} sites (faults: {faults}), {count(nights, 'night')}...")
    results = run_demo(output, sites=sites, seed=seed, faults=faults, time_scale=time_scale, nights=nights)
    for result in results:
        console.print(f"\n{closing_line(result)}", soft_wrap=True, highlight=False, markup=False)
        console.print(f"Run directory: {result.run_dir}", soft_wrap=True)
        for path in result.files:
            console.print(f"  {path.relative_to(result.run_dir)}", soft_wrap=True)
    html = next((p for p in results[-1].files if p.name == "operator.html"), None)
    if html:
        # soft_wrap: a terminal must be able to open the link, so it is never broken across lines
        console.print(f"\nOpen the operator's report: file://{html}", soft_wrap=True, highlight=False)
    if nights == 1:
        console.print("Trend charts appear from the second night: run with --nights 2.")
