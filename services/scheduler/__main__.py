"""Runs the scheduler (and rollout manager): `python -m services.scheduler --config PATH`.

Stops cleanly on SIGTERM/SIGINT (finishes the current tick, flushes what it produced).
"""

from seamlessflow.scheduler.service import run_service
from seamlessflow.service_main import run_until_signal


def main() -> None:
    run_until_signal("services.scheduler", lambda settings, stop, _: run_service(settings, stop))


if __name__ == "__main__":
    main()
