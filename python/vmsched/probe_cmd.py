"""Registers this subcommand on the vmsched CLI."""
import typer


def register(app: typer.Typer) -> None:
    pass
