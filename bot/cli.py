"""The ``warroom`` command line (typer)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Warroom: an incident-response agent for Slack.", no_args_is_help=True)


@app.command()
def version() -> None:
    """Print the installed version."""
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("warroom"))


def main() -> None:
    """Console-script entry point."""
    app()
