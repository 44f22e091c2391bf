"""Runs one rollout worker: `python -m services.rollout --config PATH --resource-id ID`.

Starts and supervises a vLLM server for resource ID, obeys the control topic, heartbeats on the
status topic. Stops cleanly on SIGTERM/SIGINT (the engine is stopped too).
"""

from seamlessflow.rollout.service import run_service
from seamlessflow.service_main import run_until_signal


def main() -> None:
    run_until_signal(
        "services.rollout", lambda settings, stop, args: run_service(settings, args.resource_id, stop),
        add_arguments=lambda p: p.add_argument("--resource-id", required=True,
                                               help="this worker's resource id (its control-topic key)"),
        quiet_loggers=["httpx"])  # one line per heartbeat otherwise


if __name__ == "__main__":
    main()
