"""The dashboard's own options: the `dashboard:` section of the settings file (or SEAMLESSFLOW_DASHBOARD__*)."""

from __future__ import annotations

from pydantic import ConfigDict

from seamlessflow.config import SectionOptions


class DashboardOptions(SectionOptions):
    """The `dashboard:` section."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    SECTION = "dashboard"

    host: str = "127.0.0.1"
    """Address the dashboard listens on."""
    port: int = 8300
    """Port of the dashboard's page (and its /metrics)."""
    tokenizer: str | None = None
    """A tokenizer.json (or its directory) to show token text; None: the served model's."""

