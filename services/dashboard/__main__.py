"""Runs the web dashboard: `python -m services.dashboard --config PATH` (settings section `dashboard:`).

Stops cleanly on SIGTERM/SIGINT.
"""

import logging

from seamlessflow.dashboard.app import run_dashboard
from seamlessflow.service_main import run_until_signal


def main() -> None:
    run_until_signal("services.dashboard", lambda settings, stop, _: run_dashboard(
        settings, stop, announce=logging.getLogger("dashboard").info))


if __name__ == "__main__":
    main()
