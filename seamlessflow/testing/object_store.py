"""An S3-compatible object store for tests: moto's server (from PyPI) on a free local port.

Why a real server and not moto's in-process mock: the trainer under test is another process (killed with
-9 and started again), and s3fs talks HTTP; a server is what both reach, as they would reach real storage.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class ObjectStore:
    endpoint_url: str

    def storage_options(self) -> dict[str, Any]:
        """fsspec/s3fs options that reach this store (the trainer's `checkpoint_storage`)."""
        return {"endpoint_url": self.endpoint_url, "key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}

    def make_bucket(self, name: str) -> str:
        import s3fs

        s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options()).mkdir(name)
        return f"s3://{name}"


@contextlib.contextmanager
def object_store(host: str = "127.0.0.1") -> Iterator[ObjectStore]:
    """moto's S3 app served on a port the system picks when it binds (a port chosen before and bound after
    may be taken in between: seen running the suite, where moto's threaded server then waited forever for a server
    that had failed to start); a failure to bind raises here."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    server = make_server(host, 0, DomainDispatcherApplication(create_backend_app), threaded=True,
                         request_handler=MotoRequestHandler)
    serving = threading.Thread(target=server.serve_forever, name="object-store", daemon=True)
    serving.start()
    url = f"http://{host}:{server.server_address[1]}"
    # moto keeps its buckets in process-wide state: a second store in one test process would find the
    # first one's buckets (seen: a test's bucket "already exists"), so each store starts empty
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=30).close()
    try:
        yield ObjectStore(url)
    finally:
        server.shutdown()
        serving.join()
        server.server_close()
