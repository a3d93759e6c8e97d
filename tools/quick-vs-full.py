#!/usr/bin/env python3
"""How often a quick run gives a full run's verdict, per paper and experiment:

    vmsched reproduce PAPER --out runs/full
    vmsched reproduce PAPER --quick --out runs/quick
    tools/quick-vs-full.py runs/full runs/quick

Reads both runs' reproduce.json, pairs the rows by claim id, and prints the share of
scored claims (extensions aside) whose verdict is the same, then each claim whose
verdict differs."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full", type=Path)
    parser.add_argument("quick", type=Path)
    args = parser.parse_args()
    full = {row["id"]: row for row in json.loads((args.full / "reproduce.json").read_text()) if not row["extension"]}
    quick = {row["id"]: row for row in json.loads((args.quick / "reproduce.json").read_text())}
    missing = sorted(set(full) - set(quick))
    if missing:
        raise SystemExit(f"{args.quick}: no quick row for {', '.join(missing)}")
    papers: dict[str, list[bool]] = {}
    for cid, row in full.items():
        papers.setdefault(row["paper"], []).append(quick[cid]["verdict"] == row["verdict"])
    for paper, same in papers.items():
        print(f"{paper}: {sum(same)}/{len(same)} claims ({100 * sum(same) / len(same):.0f}%) keep the full run's verdict")
    every = [s for same in papers.values() for s in same]
    print(f"overall: {sum(every)}/{len(every)} ({100 * sum(every) / len(every):.0f}%)")
    for cid, row in full.items():
        if quick[cid]["verdict"] != row["verdict"]:
            print(f"  {cid} ({row['scenario']}): full {row['verdict']}, quick {quick[cid]['verdict']}"
                  f"{' (quick underpowered)' if quick[cid]['underpowered'] else ''}")


if __name__ == "__main__":
    main()
