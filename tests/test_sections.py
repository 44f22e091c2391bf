"""The section table: every key of every section carries its help, and the table names every section in use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from seamlessflow.config import Settings
from seamlessflow.reference import keys
from seamlessflow.sections import SECTIONS
from seamlessflow.stack.options import ServicesOptions
from seamlessflow.stack.services import SERVICES, STACK_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
SECTION_CALL = re.compile(r"""\.section\(\s*["']([a-z_]+)["']\s*\)""")


def keys_without_help(model: type[BaseModel]) -> list[str]:
    return [key.name for key in keys(model) if not key.help.strip()]


@pytest.mark.parametrize("model", [Settings, *SECTIONS.values()], ids=["settings", *SECTIONS])
def test_every_key_has_help(model):
    assert keys_without_help(model) == []


def test_a_key_without_help_is_found_nested_too():
    class Inner(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        cpus: str | None = None  # a comment is no help

    class Outer(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        port: int = 0
        """Where it listens."""
        workers: dict[str, Inner] = {}
        """By id."""

    assert keys_without_help(Outer) == ["workers.<id>.cpus"]


def test_the_table_names_every_section_of_the_stack_defaults():
    defaults = yaml.safe_load(STACK_DEFAULTS.read_text())
    assert set(defaults) - set(Settings.model_fields) - set(SECTIONS) == set()


def test_the_table_names_every_section_the_code_reads():
    """Every `settings.section("name")` of the shipped code (a search of the text, nothing imported)."""
    files = [p for folder in ("seamlessflow", "services") for p in (ROOT / folder).rglob("*.py")]
    read = {name for path in files for name in SECTION_CALL.findall(path.read_text())}
    assert read and read - set(SECTIONS) == set()


def test_the_services_section_names_every_service_up_runs():
    assert tuple(ServicesOptions.model_fields) == SERVICES


def test_sections_are_not_settings_fields():
    """A section named like a top-level field would be that field, never the section."""
    assert set(SECTIONS) & set(Settings.model_fields) == set()
