"""The ``warroom`` command line (typer): thin commands over the modules that do the work.

Exit codes: 0 done; 1 a check or an operation failed; 2 the configuration is
incomplete or invalid (the message names the variable to set); 130 interrupted (SIGINT),
143 stopped by SIGTERM (``chat`` and ``drill`` clean up first: sandboxes, workers, files).
The services (``serve``, ``worker``, ``gateway``) stop on SIGTERM or SIGINT as they are meant
to: they finish the work in flight and exit 0.
"""

from __future__ import annotations

import asyncio
import io
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO, TypeVar

import typer

from bot.cli.memory import memory_app

if TYPE_CHECKING:
    from pydantic import ValidationError

    from bot.cli.preflight import Role
    from bot.cli.skills_io import SkillReport
    from bot.settings import Settings
    from memory_store import FileStore

app = typer.Typer(
    help="Warroom: an incident-response agent for Slack.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
skills_app = typer.Typer(
    help="Copy Claude Code skill folders (<name>/SKILL.md + files) in and out of an org.",
    no_args_is_help=True,
)
app.add_typer(skills_app, name="skills")
app.add_typer(memory_app, name="memory")
mcp_app = typer.Typer(help="The MCP servers of WARROOM_MCP_CONFIG.", no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")

T = TypeVar("T")
SkillsOperation = Callable[["FileStore", str, Path], Awaitable[list["SkillReport"]]]

CONFIG_ERROR = 2
INTERRUPTED = 130
OrgOption = Annotated[
    str | None,
    typer.Option(
        "--org",
        help="Org id (Slack enterprise or team id). Default: the bot token's org from "
        "auth.test, else 'local' (the chat's org).",
    ),
]


@app.command()
def serve() -> None:
    """Run the Slack bot (without REDIS_URL also the worker, sandboxes and SQLite)."""
    from bot.cli.credentials import SLACK_HELP, missing_for_serve
    from bot.cli.serve import run_serve
    from bot.logs import setup_logging

    settings = _settings()
    if missing := missing_for_serve(settings):
        _fail("\n".join([*(str(m) for m in missing), "", SLACK_HELP]), CONFIG_ERROR)
    _preflight(settings, "bot" if settings.redis_url else "steps")
    setup_logging()
    _run(lambda: run_serve(settings))


@app.command()
def worker(
    processes: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    threads: Annotated[
        int | None,
        typer.Option(min=1, help="Threads per process [default: WARROOM_WORKER_THREADS]"),
    ] = None,
) -> None:
    """Run Dramatiq worker processes for REDIS_URL (this process becomes their parent)."""
    from bot.cli.credentials import missing_for_worker
    from bot.cli.worker import prepare_worker_env, run_worker

    settings = _settings()
    if not settings.redis_url:
        _fail(
            "REDIS_URL is not set: workers share work through Redis. Set it (redis://host:6379/0),"
            " or run `warroom serve` alone, which has its own worker.",
            CONFIG_ERROR,
        )
    if missing := missing_for_worker(settings):
        _fail("\n".join(str(m) for m in missing), CONFIG_ERROR)
    threads = threads or settings.worker_threads
    prepare_worker_env(settings, threads=threads)  # before the checks import Dramatiq
    _preflight(settings)
    if settings.metrics_port is not None:  # served later, by a process Dramatiq starts
        from bot.metrics import check_metrics_port

        _run(lambda: check_metrics_port(settings.metrics_port or 0))
    code = _run(lambda: run_worker(settings, processes=processes, threads=threads))
    if code:
        raise typer.Exit(code)


@app.command()
def gateway() -> None:
    """Run the egress gateway for remote sandboxes (WARROOM_GATEWAY_LISTEN; workers serve local
    jails themselves). Sandboxes reach it at WARROOM_GATEWAY_URL with their session's token.
    SIGTERM or SIGINT: requests in flight finish (up to 5 s), then it exits 0."""
    from bot.egress import run_gateway
    from bot.logs import setup_logging

    settings = _settings()
    if settings.egress_rules is not None:  # without rules run_gateway says what to set
        _preflight(settings, "gateway")
    setup_logging()

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_gateway(settings, stop=stop)

    _run(lambda: asyncio.run(serve()))


@app.command()
def migrate() -> None:
    """Upgrade the database schema to the newest version (serve and workers also do this)."""
    from memory_store import Database

    settings = _settings()

    async def upgrade() -> str:
        db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
        try:
            await db.migrate()
            return (await db.schema_version()).head
        finally:
            await db.dispose()

    head = _run(lambda: asyncio.run(upgrade()))
    typer.echo(f"database schema at {head}")


@app.command()
def chat(
    verbose: Annotated[
        bool, typer.Option(help="Log warnings and errors (with tracebacks) to the terminal.")
    ] = False,
) -> None:
    """Investigate in the terminal: type a message, watch progress and answers, type to steer.

    Exits 1 when the session ended failed (the reason is printed); logs go to
    ``chat.log`` under the data directory unless ``--verbose``.
    """
    from bot.cli.chat import CHAT_LOG_FILE, run_chat
    from bot.cli.credentials import missing_for_chat
    from bot.logs import setup_logging
    from memory_store import SessionStatus

    settings = _settings()
    if missing := missing_for_chat(settings):
        _fail(str(missing[0]), CONFIG_ERROR)
    _preflight(settings)
    if verbose:
        setup_logging("WARNING")
    else:
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            log_file = (settings.data_dir / CHAT_LOG_FILE).open("a", encoding="utf-8")
        except OSError as exc:
            _fail(f"WARROOM_DATA_DIR: cannot write {settings.data_dir}: {exc}", CONFIG_ERROR)
        setup_logging("INFO", stream=log_file)
    status = _run(lambda: run_chat(settings, stdin=_lenient(sys.stdin), out=sys.stdout))
    if status is SessionStatus.FAILED:
        if not verbose:
            typer.echo(f"details: {settings.data_dir / CHAT_LOG_FILE}", err=True)
        raise typer.Exit(1)


@app.command()
def doctor(
    quick: Annotated[
        bool, typer.Option(help="Only the database and Redis (the container health check).")
    ] = False,
) -> None:
    """Check settings, database, Redis, sandboxes, Slack and Anthropic; say what to fix
    (exit 1 on a problem, 2 when a setting is invalid: after the whole checklist)."""
    from pydantic import ValidationError

    from bot.cli.doctor import failed, render, run_checks
    from bot.settings import settings_despite_errors

    try:  # an invalid setting is a line of the checklist, checked with the rest
        settings, invalid = settings_despite_errors()
    except ValidationError:
        settings, invalid = _settings(check_database=False), []
    results = asyncio.run(run_checks(settings, quick=quick, invalid=invalid))
    typer.echo(render(results))
    if invalid:
        raise typer.Exit(CONFIG_ERROR)
    if failed(results):
        raise typer.Exit(1)


@skills_app.command("import")
def skills_import(
    directory: Annotated[Path, typer.Argument(help="A folder of skill folders, or one.")],
    org: OrgOption = None,
) -> None:
    """Import skill folders into the org's /skills (SKILL.md is validated first)."""
    from bot.cli.skill_folders import ASSET, ASSETS_NOTE
    from bot.cli.skills_io import import_skills

    settings = _settings()
    org_id, reports = _run(
        lambda: asyncio.run(_with_store(settings, org, import_skills, directory))
    )
    typer.echo(f"org {org_id}:")
    for report in reports:
        typer.echo(_describe(report, "imported"))
    if any(why.endswith(ASSET) for report in reports for _, why in report.skipped):
        typer.echo(ASSETS_NOTE)
    if not any(r.written or r.unchanged or r.problems for r in reports):
        typer.echo(f"no skill folders (<name>/SKILL.md) found in {directory}")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


@skills_app.command("export")
def skills_export(
    directory: Annotated[Path, typer.Argument(help="Where to write the skill folders.")],
    org: OrgOption = None,
) -> None:
    """Write the org's /skills as Claude Code skill folders under DIRECTORY."""
    from bot.cli.skills_io import export_skills

    settings = _settings()
    org_id, reports = _run(
        lambda: asyncio.run(_with_store(settings, org, export_skills, directory))
    )
    typer.echo(f"org {org_id}: {len(reports)} skill folder(s) written to {directory}")
    for report in reports:
        typer.echo(_describe(report, "exported"))


@mcp_app.command("list")
def mcp_list() -> None:
    """Start the configured MCP servers as a worker would; print each one's state and tools.

    Exits 1 when a server is down.
    """
    from bot.cli.mcp import list_servers

    settings = _settings(check_database=False)
    listing = _run(lambda: asyncio.run(list_servers(settings)))
    if listing is None:
        typer.echo("WARROOM_MCP_CONFIG is not set: no MCP servers")
        return
    text, down = listing
    typer.echo(text)
    if down:
        raise typer.Exit(1)  # a server is down: scripts and health checks must see it


@app.command("export-incident")
def export_incident(
    channel: Annotated[str, typer.Argument(help="The incident's Slack channel id (C…).")],
    out: Annotated[
        Path, typer.Option("--out", help="Where to write (a folder per incident in it).")
    ] = Path("."),
    thread: Annotated[
        str | None, typer.Option("--thread", help="Only this thread (its root ts).")
    ] = None,
    org: OrgOption = None,
) -> None:
    """Write an incident's timeline, notes and postmortem as Markdown and JSON."""
    from bot.cli.export import Exported
    from bot.cli.export import export_incident as export

    settings = _settings()

    async def run() -> tuple[str, Exported]:
        from memory_store import Database

        db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
        try:
            await db.migrate()
            org_id = org or await _default_org(settings)
            url = await _workspace_url(settings)
            done = await export(db, org_id, channel, out, thread_ts=thread, workspace_url=url)
            return org_id, done
        finally:
            await db.dispose()

    org_id, done = _run(lambda: asyncio.run(run()))
    postmortem = "a postmortem" if done.postmortem else "no postmortem yet"
    typer.echo(
        f"org {org_id}, {channel}: {done.entries} timeline entries, {done.notes} note file(s), "
        f"{postmortem}; written to {done.directory}"
    )


@app.command("fake-anthropic")
def fake_anthropic(
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8765,
    script: Annotated[
        Path | None,
        typer.Option(help="JSON array of replies (see README); default: echo the user's text."),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
) -> None:
    """Serve a fake Anthropic Messages API, so `warroom chat` runs without a real key."""
    from bot.fakes.anthropic_api import FakeAnthropicAPI, Script
    from bot.fakes.anthropic_script import ScriptError, ScriptPlayer, echo_reply, script_from_json

    replies: Script = echo_reply
    try:
        if script is not None:
            replies = ScriptPlayer(script_from_json(_utf8(script)), say=typer.echo)
    except (OSError, ScriptError) as exc:
        _fail(f"cannot use the script {script}: {exc}", CONFIG_ERROR)

    async def run() -> None:
        async with FakeAnthropicAPI(replies, host=host, port=port) as fake:
            typer.echo(f"fake Anthropic API on {fake.base_url}")
            typer.echo(f"  export ANTHROPIC_BASE_URL={fake.base_url} ANTHROPIC_API_KEY=fake-key")
            await _until_signal()

    try:
        asyncio.run(run())
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; try another --port")


@app.command("fake-slack")
def fake_slack(
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8766,
    events_url: Annotated[
        str | None,
        typer.Option(
            help="The app's Request URL (http://127.0.0.1:3000/slack/events): each line "
            "typed is then a message to it in #incident, and the bot's posts are printed."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
) -> None:
    """Serve a fake Slack Web API, so `warroom serve` runs in HTTP mode without Slack."""
    from bot.cli.chat_input import stdin_lines
    from bot.cli.fake_slack import LINES, deliver_lines, exports, watch_channel
    from bot.fakes.slack_api import FakeSlackApi

    async def run() -> None:
        fake = FakeSlackApi()
        await fake.start(host=host, port=port)
        try:
            typer.echo(f"fake Slack Web API on {fake.base_url}")
            typer.echo(f"  {exports(fake)}")
            if events_url is None:
                await _until_signal()
                return
            typer.echo(f"the app's Request URL: {events_url}; {LINES}")
            tasks = [
                asyncio.create_task(watch_channel(fake, typer.echo)),
                asyncio.create_task(
                    deliver_lines(fake, events_url, stdin_lines(sys.stdin), typer.echo)
                ),
            ]
            try:
                await _until_signal()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await fake.stop()

    try:
        asyncio.run(run())
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; try another --port")


@app.command()
def drill(
    database_url: Annotated[
        str | None,
        typer.Option(help="PostgreSQL URL of a scratch database (default: a temporary SQLite)."),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="Redis URL: the full drill, with worker processes [default: one process]"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=2, help="Worker processes of the full drill.")] = 2,
    keep: Annotated[bool, typer.Option(help="Keep the drill's directory (logs, data).")] = False,
) -> None:
    """A scripted incident against fake Slack and Anthropic APIs; exit 0 if every check passed."""
    from bot.drill import DrillError, DrillOptions, run_drill

    if redis_url and not database_url:
        _fail("the full drill (--redis-url) shares a database: give --database-url", CONFIG_ERROR)
    options = DrillOptions(
        database_url=database_url, redis_url=redis_url, workers=workers, keep=keep
    )
    try:
        result = _run(lambda: run_drill(options, say=typer.echo))
    except DrillError as exc:
        _fail(f"the drill could not run: {exc}")
    if not result.passed:
        raise typer.Exit(1)


@app.command()
def version() -> None:
    """Print the installed version."""
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("warroom"))


def main() -> None:
    """Console-script entry point."""
    app()


# ----- helpers ----------------------------------------------------------------------


def _settings(*, check_database: bool = True) -> Settings:
    """The settings, or exit 2 naming each invalid variable (``DATABASE_URL`` too, unless
    ``check_database`` is False: ``doctor`` reports it as a check)."""
    from pydantic import ValidationError

    from bot.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        _fail("invalid settings:\n  " + "\n  ".join(_problems(exc)), CONFIG_ERROR)
    if check_database and settings.database_url is not None:
        from memory_store import normalise_url  # SQLAlchemy's: not for ``doctor --quick``

        try:
            normalise_url(settings.database_url)
        except ValueError as exc:
            _fail(
                f"DATABASE_URL is not supported ({exc}); use postgresql://user:pass@host:5432/db"
                " or sqlite:///path, or unset it for SQLite under WARROOM_DATA_DIR",
                CONFIG_ERROR,
            )
    return settings


def _problems(error: ValidationError) -> list[str]:
    """One line per invalid variable: ``NAME=value: why`` (secrets' values not shown)."""
    from bot.settings import invalid_settings

    return [str(found) for found in invalid_settings(error)]


def _utf8(path: Path) -> str:
    """``path``'s text; a file that is not UTF-8 is a ``ScriptError`` naming the bad byte.

    Raises:
        OSError: the file cannot be read.
        ScriptError: it is not UTF-8 (JSON text is, RFC 8259 §8.1).
    """
    from bot.fakes.anthropic_script import ScriptError

    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ScriptError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start});"
            " save the file as UTF-8"
        ) from None


def _lenient(stream: TextIO) -> TextIO:
    """``stream`` decoding invalid bytes as U+FFFD instead of failing later."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="replace")
    return stream


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def _run(work: Callable[[], T]) -> T:
    """Run ``work``, turning the errors a person can fix into a message and an exit code.

    The error classes are imported only when ``work`` raised, so the commands that never touch
    Slack or the database do not pay for importing them.
    """
    try:
        return work()
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
    except Exception as exc:
        from bot.cli.signals import Interrupted

        if isinstance(exc, Interrupted):
            raise typer.Exit(exc.exit_code) from None
        _explain(exc)
        raise


def _preflight(settings: Settings, role: Role = "steps") -> None:
    """Read the files every step depends on now (egress rules and their secrets, MCP
    configuration, approval policy, prices), so a wrong one stops start-up with exit 2
    naming each problem, instead of failing every step later (``bot.cli.preflight``)."""
    from bot.cli.preflight import problems

    if found := problems(settings, role):
        lines = "\n  ".join(str(p) for p in found)
        _fail(
            f"invalid configuration:\n  {lines}\nRun `warroom doctor` for the rest.", CONFIG_ERROR
        )


def _explain(exc: Exception) -> None:
    """Exit with a message for the errors a person can fix; return for any other."""
    from bot.cli.export import NoIncident
    from bot.errors import SlackCallFailed, SlackUnreachable
    from bot.metrics import MetricsPortUnavailable
    from bot.settings import MissingSetting
    from bot.slack.modes import PortUnavailable
    from harness import McpConfigError, PolicyError
    from memory_store import DatabaseUnavailable
    from sandbox_client.gateway import MissingSecret, RulesError

    if isinstance(exc, MissingSetting):
        _fail(str(exc), CONFIG_ERROR)
    if isinstance(exc, RulesError | MissingSecret):
        _fail(f"egress rules (WARROOM_EGRESS_RULES): {exc}", CONFIG_ERROR)
    if isinstance(exc, SlackUnreachable):
        _fail(f"Slack could not be reached ({exc.method}): check SLACK_API_URL and the network.")
    if isinstance(exc, SlackCallFailed) and (variable := getattr(exc, "variable", None)):
        _fail(f"{variable} was refused by Slack ({exc.method}: {exc.error}).", CONFIG_ERROR)
    if isinstance(exc, SlackCallFailed):
        _fail(f"Slack refused {exc.method}: {exc.error}. Run `warroom doctor`.")
    if isinstance(exc, DatabaseUnavailable):
        _fail(f"the database is unreachable: {exc}. Check DATABASE_URL; `warroom doctor`.")
    if isinstance(exc, McpConfigError):
        _fail(f"WARROOM_MCP_CONFIG: {exc}", CONFIG_ERROR)
    if isinstance(exc, PolicyError):
        _fail(f"approval policy (WARROOM_APPROVAL_POLICY): {exc}", CONFIG_ERROR)
    if isinstance(exc, NoIncident):
        _fail(str(exc))
    if isinstance(exc, PortUnavailable | MetricsPortUnavailable):
        _fail(f"{exc}: choose another port, or stop what holds it.", CONFIG_ERROR)
    if isinstance(exc, OSError):
        _fail(str(exc))


async def _with_store(
    settings: Settings, org: str | None, operation: SkillsOperation, directory: Path
) -> tuple[str, list[SkillReport]]:
    """Run a skills import/export against the configured database (migrated first)."""
    from memory_store import Database, FileStore

    db = Database.from_url(settings.database_url, data_dir=settings.data_dir)
    try:
        await db.migrate()
        org_id = org or await _default_org(settings)
        return org_id, await operation(FileStore(db), org_id, directory)
    finally:
        await db.dispose()


async def _default_org(settings: Settings) -> str:
    """The bot token's org (``enterprise_id or team_id`` from ``auth.test``), else the
    chat's org."""
    from bot.cli.chat import CHAT_ORG
    from bot.durable.wiring import make_slack_client
    from bot.errors import slack_call

    if settings.slack_bot_token is None:
        return CHAT_ORG
    client = make_slack_client(settings)
    identity = await slack_call("auth.test", client.auth_test())
    return str(identity.get("enterprise_id") or identity["team_id"])


async def _workspace_url(settings: Settings) -> str | None:
    """The workspace URL permalinks start with (``auth.test``), or None without a bot token."""
    from bot.durable.wiring import make_slack_client
    from bot.slack.installation import slack_workspace_url

    if settings.slack_bot_token is None:
        return None
    return await slack_workspace_url(make_slack_client(settings))


def _describe(report: SkillReport, verb: str) -> str:
    whole = [why for path, why in report.skipped if not path]
    if whole:
        return f"  skipped  {report.name}/: {whole[0]}"
    name = f"{report.name} (from {report.source})" if report.source else report.name
    if not report.ok:
        lines = [f"  invalid  {name}: not imported"]
        lines += [f"           - {problem}" for problem in report.problems]
    else:
        counts = f"{len(report.written)} file(s) {verb}"
        if report.unchanged:
            counts += f", {len(report.unchanged)} unchanged"
        lines = [f"  ok       {name}: {counts}"]
    lines += [f"  skipped  {report.name}/{path}: {why}" for path, why in report.skipped]
    return "\n".join(lines)


async def _until_signal() -> None:
    """Return on SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
