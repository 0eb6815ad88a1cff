"""Judging facts in the per-area tests (tests/test_area_*.py): the findings the whole pipeline gives, so that a
fault derived one fact at a time asserts the exact codes over every check (the one expected, and nothing else
starting to complain), and what a finding's shell commands leave behind."""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpudoctor import pipeline

from conftest import REAL

#: Faults recorded for real on the 2 x H200 machine (tests/fixtures/real/README.md).
FAULTS_DIR = REAL / "h200x2-20261121" / "faults"


def findings(facts: dict[str, Any]) -> list[dict[str, Any]]:
    return pipeline.judge(facts)["findings"]


def codes(facts: dict[str, Any]) -> set[str]:
    return {f["code"] for f in findings(facts)}


def only(facts: dict[str, Any], code: str) -> dict[str, Any]:
    """The one finding ``facts`` give, which must carry ``code``."""
    found = findings(facts)
    assert [f["code"] for f in found] == [code], [(f["code"], f["title"]) for f in found]
    return found[0]


def statuses(facts: dict[str, Any], area: str) -> dict[str, str]:
    """Each check of ``area`` with its status."""
    return {c["id"]: c["status"] for c in pipeline.judge(facts)["checks"] if c["area"] == area}


def lib_index(facts: dict[str, Any], framework: str, family: str) -> int:
    libs = facts["frameworks"][framework]["info"]["loaded_libraries"]
    return next(i for i, lib in enumerate(libs) if lib["family"] == family)


def load_fault(name: str) -> dict[str, Any]:
    return json.loads((FAULTS_DIR / f"{name}.json").read_text())["facts"]


def after_commands(commands: list[str], env: dict[str, str]) -> dict[str, str]:
    """The environment after running a finding's export/unset commands in order, as a shell would."""
    env = dict(env)
    for command in commands:
        words = shlex.split(command)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value.replace("$PATH", env.get("PATH", ""))
        elif words[0] == "unset":
            env.pop(words[1], None)
    return env
