"""`fleet deploy`: register the night and the security runs over many dashboards on a work pool, running this
checkout."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="Register maintain-dashboards, patch-dashboards and their per-dashboard deployments on a work "
                       "pool (needs a Prefect server).")


@app.callback(invoke_without_command=True)
def deploy(
    pool: Annotated[str, typer.Option(help="The work pool (create it with `prefect work-pool create`).")] = (
        "fleet-maintenance"
    ),
    source: Annotated[
        Path, typer.Option(help="The checkout the workers run: this machine's, or a path every worker mounts.")
    ] = Path("."),
) -> None:
    """Register the fan-outs and their per-dashboard deployments with the Prefect server (PREFECT_API_URL); workers
    of `pool` run them."""
    from deployments.work_pool import FAN_OUT_DEPLOYMENT, POOL_DEPLOYMENTS, SECURITY_FAN_OUT_DEPLOYMENT, deploy_to_pool

    if not (source / POOL_DEPLOYMENTS[0].entrypoint.split(":")[0]).is_file():
        raise typer.BadParameter(f"{source.resolve()} is not a checkout of fleet-maintenance", param_hint="--source")
    asyncio.run(deploy_to_pool(source, pool))
    console = Console()
    for deployment in POOL_DEPLOYMENTS:
        console.print(f"Deployed {deployment.entrypoint} as {deployment.name!r} on pool {pool!r}.", soft_wrap=True)
    console.print(f"Run the night: prefect deployment run '{FAN_OUT_DEPLOYMENT}'", soft_wrap=True, highlight=False)
    console.print(f"Between nights (hourly, e.g. from a schedule): prefect deployment run "
                  f"'{SECURITY_FAN_OUT_DEPLOYMENT}'", soft_wrap=True, highlight=False)
