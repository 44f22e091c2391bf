"""The trajectory proxy: an OpenAI-compatible gateway that records token-level I/O onto Kafka.

Start it with `python -m services.proxy --config PATH` (options in the config's `proxy:` section, see
`ProxyOptions`), or in-process with `await ProxyService(settings).start()`.
"""

from seamlessflow.proxy.options import EngineOptions, ProxyOptions
from seamlessflow.proxy.service import ProxyService

__all__ = ["EngineOptions", "ProxyOptions", "ProxyService"]
