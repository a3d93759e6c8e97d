"""The `vmsched` command line."""
import typer

from . import plan_cmd, probe_cmd

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="vmsched: CPU scheduling in virtualized clouds, simulated and probed.")
plan_cmd.register(app)
probe_cmd.register(app)


def main() -> None:
    app()
