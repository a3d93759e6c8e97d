"""`vmsched plan`: turn a host + VM reservation file into a verified Tableau table."""
import json
import sys
from enum import Enum
from pathlib import Path

import typer

from .atomic import write_atomic
from .errors import EXIT_PLAN_UNVERIFIED, UserError, fail
from .terminal import make_console, styled


class TableFormat(str, Enum):
    json = "json"
    bin = "bin"


def _input_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix == ".toml":
        return "toml"
    raise fail(f"{path}: unknown input type {suffix or '(none)'}; use a .toml or .json file")


def _print_report(console, report: dict, table: dict, explain: bool) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    cores = RichTable(title="per-core reservation", show_lines=False)
    for column in ("core", "utilization", "allocations", "slice (us)"):
        cores.add_column(column, justify="right")
    for core in report["cores"]:
        cores.add_row(str(core["core"]), f"{core['utilization']:.4f}", str(core["allocations"]),
                      f"{core['slice_ns'] / 1e3:.1f}")
    console.print(cores)
    clusters = ", ".join("{" + ",".join(map(str, c)) + "}" for c in report["clusters"]) or "none"
    coalesce = report["coalesce"]
    console.print(f"allocations: {report['allocations']}   slices: {report['slices']}")
    console.print(f"dedicated cores: {report['dedicated']}   splits (C=D): {len(report['splits'])}   "
                  f"clusters: {clusters}   placement attempts: {report['attempts']}")
    console.print(f"budgets raised to the coalescing threshold: {coalesce['budgets_raised']}")
    console.print(f"coalescing below {coalesce['threshold_ns'] / 1e3:.2f} us: grown {coalesce['grown']}, "
                  f"absorbed {coalesce['absorbed']}, traded {coalesce['traded']}, exchanged {coalesce['exchanged']}, "
                  f"left short {coalesce['kept_short']}", soft_wrap=True)  # one line, whatever the terminal's width
    console.print(f"table size: {report['table_bytes']} bytes (binary)   "
                  f"planning time: {report['planning_time_ns'] / 1e6:.2f} ms")
    console.print(Text.assemble("verifier: ", styled("PASS", "green") if report["verified"] else styled("FAIL", "red")))
    if explain:
        vcpus = RichTable(title="vCPU -> periodic task (Tableau Sec. 5)")
        for column in ("vm", "vcpu", "U", "L (ms)", "T (ns)", "C (ns)", "placement", "cores"):
            vcpus.add_column(column, justify="right")
        for v in table["vcpus"]:
            vcpus.add_row(v["vm"], str(v["vcpu"]), f"{v['utilization']:.4f}", f"{v['latency_ms']:g}",
                          str(v["period_ns"]), str(v["budget_ns"]), v["placement"],
                          ",".join(map(str, v["cores"])))
        console.print(vcpus)
        for split in report["splits"]:
            console.print(f"split: {split['vm']}/{split['vcpu']} into {split['pieces']} pieces")


def _read_input(spec: str) -> tuple[str, str, str]:
    """(text, kind, name for messages) of a .toml/.json file or a built-in scenario."""
    from . import api
    path = Path(spec)
    if not path.exists() and path.suffix == "" and path.parent == Path("."):
        try:
            scenario = api.load_scenario(spec)
        except UserError as error:
            raise fail(str(error))
        return scenario.text, "toml", scenario.source
    kind = _input_kind(path)
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise fail(f"{path}: not a regular file")
    try:
        return path.read_text(encoding="utf-8"), kind, str(path)
    except UnicodeDecodeError as error:
        raise fail(f"{path}: not a text file (not UTF-8 at byte {error.start})")
    except OSError as error:
        raise fail(f"{path}: cannot read ({error.strerror})")


def _check_out(out: str) -> None:
    """Before planning: --out must be a file path whose directory exists."""
    if out == "-":
        return
    if not out.strip():
        raise fail("--out: must not be empty")
    target = Path(out)
    if target.is_dir():
        raise fail(f"{target}: is a directory; --out names the table file to write")
    if not target.parent.is_dir():
        raise fail(f"{target}: no directory {target.parent}")


def plan(
    input_spec: str = typer.Argument(..., metavar="INPUT",
                                     help="host and VM reservations (.toml or .json), or a built-in scenario name"),
    out: str = typer.Option(..., "--out", help="table file to write, or - for standard output"),
    table_format: TableFormat = typer.Option(TableFormat.json, "--format", help="json (for people) or bin (for machines)"),
    explain: bool = typer.Option(False, "--explain", help="also show each vCPU's period, budget and placement"),
) -> None:
    """Plan a verified Tableau scheduling table for the VMs in INPUT."""
    from . import _native

    text, kind, input_path = _read_input(input_spec)
    _check_out(out)
    try:
        table_json, table_bin, report_json = _native.plan_table(text, kind)
    except ValueError as error:
        raise fail(f"{input_path}: {error}")
    except RuntimeError as error:
        raise fail(f"{input_path}: {error}", code=EXIT_PLAN_UNVERIFIED)
    report = json.loads(report_json)
    report["table_bytes"] = len(table_bin)
    data = table_json if table_format is TableFormat.json else bytes(table_bin)
    to_stdout = out == "-"
    if to_stdout:
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data)
            sys.stdout.flush()
    else:
        try:
            write_atomic(out, data)
        except OSError as error:
            raise fail(f"{out}: cannot write ({error.strerror})")
    console = make_console(stderr=to_stdout)
    _print_report(console, report, json.loads(table_json), explain)
    if not to_stdout:
        console.print(f"wrote {out} ({table_format.value})")


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
