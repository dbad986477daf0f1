"""`fleet demo`: the nightly flow against an embedded emulator, ending in a rendered report."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from cli.demo import run_demo

app = typer.Typer(help="Run the nightly flow against an embedded emulator and render the report.")


@app.callback(invoke_without_command=True)
def demo(
    output: Annotated[Path, typer.Option(help="Directory for the run's summary, reports and .eml messages.")] = Path(
        "demo-output"
    ),
    sites: Annotated[int, typer.Option(min=1, max=10_000, help="Sites in the generated fleet.")] = 40,
    seed: Annotated[int, typer.Option(help="Seed of the generated fleet and of the faults.")] = 0,
    faults: Annotated[str, typer.Option(help="Fault profile: none, realistic, hostile or a file.")] = "realistic",
    time_scale: Annotated[float, typer.Option(min=0.0001, help="Multiplier of every dashboard delay.")] = 0.002,
) -> None:
    console = Console()
    console.print(f"Starting an emulated dashboard with {sites} sites (faults: {faults}) and the nightly flow...")
    result = run_demo(output, sites=sites, seed=seed, faults=faults, time_scale=time_scale)
    counts = ", ".join(f"{outcome.value} {n}" for outcome, n in sorted(result.summary.counts.by_outcome.items()))
    console.print(f"\n[bold]Nightly run {result.summary.run_id}[/bold]: {len(result.summary.items)} items ({counts})")
    console.print(f"Run directory: {result.run_dir}")
    for path in result.files:
        console.print(f"  {path.relative_to(result.run_dir)}")
    html = next((p for p in result.files if p.name == "operator.html"), None)
    if html:
        console.print(f"\nOpen the operator's report: file://{html}")
