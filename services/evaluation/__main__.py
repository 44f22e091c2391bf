"""Runs the stack's `eval` service (seamlessflow.evaluation.service): `python -m services.evaluation --config PATH`.

Stops cleanly on SIGTERM/SIGINT (after the pass in progress).
"""

from seamlessflow.evaluation.service import run_service
from seamlessflow.service_main import run_until_signal


def main() -> None:
    run_until_signal("services.evaluation", lambda settings, stop, _: run_service(settings, stop))


if __name__ == "__main__":
    main()
