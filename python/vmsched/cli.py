"""The `vmsched` command line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from . import _native, plan_cmd, probe_cmd
from .atomic import write_atomic
from .errors import fail

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="vmsched: CPU scheduling in virtualized clouds, simulated and probed.")
plan_cmd.register(app)
probe_cmd.register(app)


@app.callback()
def _root() -> None:
    """vmsched: CPU scheduling in virtualized clouds, simulated and probed."""


def _load(scenario: str) -> tuple[str, str]:
    builtins = {name: text for name, _, text in _native.builtin_scenarios()}
    if scenario in builtins:
        return builtins[scenario], scenario
    path = Path(scenario)
    if not path.exists():
        raise fail(f"{scenario}: no such file or built-in scenario (see `vmsched scenarios`)")
    return path.read_text(), str(path)


@app.command()
def run(scenario: str = typer.Argument("default"), seed: Optional[int] = None,
        out: Optional[Path] = None, set: List[str] = typer.Option([], "--set"),
        validate: bool = False) -> None:
    """Run a scenario and write DIR/summary.json."""
    text, source = _load(scenario)
    try:
        summary, _ = _native.run_scenario(text, source, list(set), seed, None, validate, False, None, None)
    except ValueError as e:
        raise fail(str(e))
    data = json.loads(summary)
    out = out or Path("runs") / f"{data['scenario']}-{data['seed']}"
    write_atomic(out / "summary.json", summary)
    for w in data["workloads"]:
        lat = w.get("latency_ns")
        extra = f" p50={lat['p50']/1e3:.1f}us p99={lat['p99']/1e3:.1f}us" if lat else ""
        print(f"{w['name']:<28} completed={w['completed']:<8} {w['throughput_per_s']:.1f}/s{extra}")
    print(f"wrote {out / 'summary.json'}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
