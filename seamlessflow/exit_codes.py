"""Exit codes a service process ends with, read by whoever started it (the supervisor, Ray's service host)."""

FENCED_EXIT_CODE = 3  # a newer process took this service's role (`kafka.fencing.Fenced`); distinct from a crash's 1
