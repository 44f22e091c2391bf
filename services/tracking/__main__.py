"""Runs the metrics sink: `python -m services.tracking --config PATH` (TensorBoard event files by default).

Stops cleanly on SIGTERM/SIGINT (flushes the trackers and commits what they hold).
"""

from seamlessflow.service_main import run_until_signal
from seamlessflow.tracking.sink import run_service


def main() -> None:
    run_until_signal("services.tracking", lambda settings, stop, _: run_service(settings, stop))


if __name__ == "__main__":
    main()
