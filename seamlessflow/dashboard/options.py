"""The dashboard's own options: the `dashboard:` section of the settings file (or SEAMLESSFLOW_DASHBOARD__*)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from seamlessflow.config import Settings


class DashboardOptions(BaseModel):
    """The `dashboard:` section."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """Address the dashboard listens on."""
    port: int = 8300
    """Port of the dashboard's page (and its /metrics)."""
    tokenizer: str | None = None
    """A tokenizer.json (or its directory) to show token text; None: the served model's."""

    @classmethod
    def from_settings(cls, settings: Settings) -> DashboardOptions:
        return cls.model_validate(settings.section("dashboard"))
