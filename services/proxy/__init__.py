"""The trajectory proxy process (`python -m services.proxy --config PATH`)."""
