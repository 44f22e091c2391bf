"""`python -m services.teacher --team T --config PATH`: one teacher worker of team T as a service (what `up` runs
for each team of `teacher.teams`, `teacher.workers` times); the same worker as `seamlessflow teacher run`."""

import argparse
import threading

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.service_main import run_until_signal, when_stopped
from seamlessflow.teacher.worker import TeacherWorker


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--team", help="the team whose teacher it is (default: settings.team)")


def run(settings: Settings, stop: threading.Event, args: argparse.Namespace) -> None:
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    worker = TeacherWorker(client, codec_for(client), args.team or settings.team)
    when_stopped(stop, worker.stop)
    worker.run()


def main() -> None:
    run_until_signal("services.teacher", run, add_arguments=add_arguments)


if __name__ == "__main__":
    main()
