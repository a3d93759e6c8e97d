"""A scenario's `[variants.NAME]` tables as named override lists, for `compare` and for
sweeps (both read them; neither imports the other for it)."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass

from . import api
from .overrides import toml_literal


@dataclass
class Variant:
    name: str
    overrides: list[str]


def scenario_variants(scenario: api.Scenario, config: dict) -> list[Variant]:
    """The `[variants.NAME]` tables of the normalized scenario, in the order the file
    lists them (the normalized form sorts them by name; the first is the reference)."""
    normalized = config.get("variants") or {}
    try:
        file_order = list(tomllib.loads(scenario.text).get("variants", {}))
    except tomllib.TOMLDecodeError:
        file_order = []
    names = [name for name in file_order if name in normalized]
    names += [name for name in normalized if name not in names]
    return [Variant(name, [f"{key}={toml_literal(value)}" for key, value in normalized[name].items()])
            for name in names]
