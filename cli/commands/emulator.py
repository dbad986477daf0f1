"""`fleet emulator serve`: run the dashboard emulator until SIGINT/SIGTERM."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from pathlib import Path

import typer
import uvicorn
from pydantic import ValidationError

from cli.demo import dashboard_environment, feed_environment
from emulator.app import create_app
from emulator.config import ALL_MODULES, EmulatorConfig
from emulator.gateway import HEAD_LIMIT_BYTES
from emulator.guard import arm_sites
from emulator.state import FleetState

app = typer.Typer(help="The dashboard emulator.", no_args_is_help=True)


def arm_guards(state: FleetState, how: str) -> list[int]:
    """`--guard`: the emulated sites' Fleet Guard, built with the home's public key (none: nothing needed)."""
    if how == "none":
        return []
    from guard.keys import GuardKeyMissing, load_keys

    try:
        keys = load_keys()
        return arm_sites(state, [keys.public], how)
    except (GuardKeyMissing, ValueError) as error:
        raise typer.BadParameter(str(error), param_hint="--guard") from None


def parse_work_seconds(text: str) -> dict[str, float]:
    """`sync=2,update_item=3.5` -> {"sync": 2.0, "update_item": 3.5}."""
    result: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        try:
            result[name.strip()] = float(value)
        except ValueError:
            raise typer.BadParameter(f"--work-seconds wants operation=seconds pairs, not {part!r}") from None
    return result


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8080, min=0, max=65535, help="Port (0: a free one)."),
    sites: int = typer.Option(50, min=0, help="Sites in a freshly generated fleet."),
    seed: int = typer.Option(0, help="Seed of the fleet generator."),
    namespace: str = typer.Option("mainwp", help="mainwp (the real product's) or svc (the spec's spelling)."),
    db: Path | None = typer.Option(None, help="SQLite file; state survives restarts. In memory when omitted."),
    credentials_out: Path | None = typer.Option(
        None, help="Write the credentials JSON here (the one place that holds them; with --db, a restart keeps them)."
    ),
    time_scale: float = typer.Option(1.0, help="Multiplier on every modelled delay (0.001 = 1000x faster)."),
    faults: str = typer.Option("none", help="Fault profile: none, realistic, hostile, or a YAML/JSON file."),
    workers: int = typer.Option(8, min=1, help="PHP workers: each request holds one from arrival to answer."),
    gateway_timeout: float = typer.Option(
        60.0, min=0, help="Modelled seconds after which the gateway answers 504 (nginx's default 60; 0: none)."
    ),
    max_body_bytes: int = typer.Option(
        1024 * 1024, min=0, help="Largest request body the gateway passes on (nginx's default 1 MiB; 0: no limit)."
    ),
    slow_site_rate: float = typer.Option(0.02, min=0, max=1, help="Share of child sites that are slow (seeded)."),
    slow_site_factor: float = typer.Option(10.0, min=1, help="How many times slower a slow site is."),
    work_seconds: str = typer.Option(
        "", help="Capacity model work times in nominal seconds, e.g. 'sync=2,update_item=3,bootstrap=0.1' "
        "(others: default)."
    ),
    modules: str = typer.Option(
        ",".join(ALL_MODULES), help="Comma list of active modules (extensions, cost-tracker, logs); '' for none."
    ),
    env_out: Path | None = typer.Option(
        None, help="Write a ready .env here: the FLEET_* settings that point the pipeline at this emulator and its "
        "vulnerability feed (private)."
    ),
    canary: int = typer.Option(0, min=0, help="Tag this many sites (the first that answer) `canary`, as a person "
                               "tags them in MainWP for the go-live's canary step."),
    guard: str = typer.Option("none", help="Fleet Guard on all sites, none, or the first N (by id), built with the "
                              "public key of the home's guard key (`fleet guard keygen`)."),
) -> None:
    """Serve the emulator; prints the REST base URL and the dashboard URL (the site root) when ready."""
    try:
        config = EmulatorConfig(
            namespace=namespace,  # type: ignore[arg-type]
            sites=sites,
            seed=seed,
            db=db,
            credentials_file=credentials_out,
            time_scale=time_scale,
            faults=faults,
            workers=workers,
            gateway_timeout=gateway_timeout,
            max_body_bytes=max_body_bytes,
            slow_site_rate=slow_site_rate,
            slow_site_factor=slow_site_factor,
            work_seconds=parse_work_seconds(work_seconds),
            modules=frozenset(m.strip() for m in modules.split(",") if m.strip()),
        )
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise typer.BadParameter(problems) from None
    started = time.monotonic()
    for secret in (credentials_out, env_out):  # fail before serving, and create each file private (secrets)
        if secret is None:
            continue
        try:
            secret.parent.mkdir(parents=True, exist_ok=True)
            secret.touch(mode=0o600)
            secret.chmod(0o600)
        except OSError as error:
            raise typer.BadParameter(f"cannot write {secret}: {error}") from None
    try:
        application = create_app(config)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    emulator = application.state.emulator
    tagged = emulator.state.tag_first_sites("canary", canary) if canary else []
    guarded = arm_guards(emulator.state, guard)
    server = uvicorn.Server(
        uvicorn.Config(application, host=host, port=port, log_level="warning", lifespan="on", access_log=False,
                       h11_max_incomplete_event_size=HEAD_LIMIT_BYTES)
    )

    original_startup = server.startup

    async def startup(sockets: list | None = None) -> None:
        await original_startup(sockets)
        bound = server.servers[0].sockets[0].getsockname()[1] if server.servers else port
        # a wildcard address is not one a client can call: print the loopback address instead
        shown = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)  # noqa: S104
        site_root = f"http://{shown}:{bound}"
        base_url = f"{site_root}/wp-json"
        emulator.base_url = base_url
        if credentials_out is not None:
            credentials_out.write_text(json.dumps(emulator.credentials(base_url), indent=2), encoding="utf-8")
        if env_out is not None:
            settings = dashboard_environment(emulator.credentials(base_url)) | feed_environment(
                emulator.credentials(base_url))  # the rehearsal covers security: the emulator's feed and its key
            env_out.write_text("".join(f"{name}={value}\n" for name, value in settings.items()), encoding="utf-8")
        if tagged:
            typer.echo(f"sites tagged canary: {', '.join(map(str, tagged))}")
        if guarded:
            from fleet.model.vocabulary import count

            typer.echo(f"Fleet Guard armed on {count(len(guarded), 'site')}")
        typer.echo(
            f"{base_url}  (dashboard URL {site_root}, {len(emulator.state.sites)} sites, namespace {namespace}, "
            f"ready in {time.monotonic() - started:.2f}s)",
            err=False,
        )

    server.startup = startup  # type: ignore[method-assign]

    def stop(_signum: int, _frame: object) -> None:
        server.should_exit = True

    # Own handlers (uvicorn's would re-raise the signal after shutdown and end with a non-zero status).
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        server.run()
    finally:
        emulator.state.close()
