"""Runs one assembler worker: `python -m services.assembler --config PATH`."""

from seamlessflow.assembler.app import run
from seamlessflow.service_main import run_until_signal


def main() -> None:
    run_until_signal("services.assembler", run)


if __name__ == "__main__":
    main()
