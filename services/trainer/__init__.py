"""The trainer process: `python -m services.trainer --config PATH`."""
