"""The `seamlessflow` command line."""
