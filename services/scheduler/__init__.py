"""The tag scheduler and rollout manager process (see seamlessflow.scheduler.service)."""
