"""Parsing of the small command-line languages: durations, time windows,
`--set key=value` overrides and `--variant NAME=key=value,...` specs."""
from __future__ import annotations

import json
import re

from .errors import UserError

_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")
# A new override inside a variant spec starts where a comma is followed by a dotted key
# and '=', so commas inside a value such as an array stay part of that value.
_OVERRIDE_SPLIT = re.compile(r",(?=\s*[A-Za-z_][\w.\-\[\]]*\s*=)")


def parse_duration_ns(text: str) -> int:
    """'2s', '500ms', '250us', '100ns': a number with its unit (a bare number is refused:
    no unit is the obvious one)."""
    match = _DURATION.match(text)
    if not match:
        raise UserError(f"{text!r}: expected a duration such as 2s, 500ms, 250us or 100ns")
    number, unit = match.groups()
    if unit is None and float(number) == 0:
        return 0  # zero needs no unit
    if unit is None:
        raise UserError(f"{text!r}: a duration needs its unit: ns, us, ms or s (e.g. {number}ms)")
    ns = round(float(number) * _UNIT_NS[unit])
    if ns >= 2**63:
        raise UserError(f"{text!r}: longer than the engine's clock can count")
    return ns


def parse_window_ns(text: str) -> tuple[int, int]:
    """'0.1s:0.3s' -> (start_ns, end_ns), end after start."""
    start_text, sep, end_text = text.partition(":")
    if not sep:
        raise UserError(f"{text!r}: expected a window START:END such as 0.1s:0.3s")
    start, end = parse_duration_ns(start_text), parse_duration_ns(end_text)
    if end <= start:
        raise UserError(f"{text!r}: the window's end must come after its start")
    return start, end


def check_override(text: str, source: str) -> str:
    """An override is `dotted.key=value`; the engine parses and validates the value."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise UserError(f"{source}: {text}: expected --set dotted.key=value")
    return text.strip()


def parse_variant(text: str, source: str) -> tuple[str, list[str]]:
    """'NAME=key=value,key=value' -> (NAME, ['key=value', ...]); 'NAME=' has no overrides.
    NAME becomes a directory, so it is checked as the scenario schema checks variant names."""
    from . import _native

    name, sep, rest = text.partition("=")
    if not sep or not name.strip():
        raise UserError(f"{source}: {text}: expected --variant NAME=key=value,key=value")
    problem = _native.variant_name_problem(name.strip())
    if problem:
        raise UserError(f"--variant {text}: {problem}")
    overrides = [check_override(part, source) for part in _OVERRIDE_SPLIT.split(rest) if part.strip()]
    return name.strip(), overrides


def toml_literal(value: object) -> str:
    """A JSON value from the normalized scenario, written back as a TOML value so it can
    travel as an override string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are a subset of TOML basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")
