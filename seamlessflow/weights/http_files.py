"""Version directories over HTTP, so a worker on another host needs no shared file system.

The trainer's host serves its weights root (`WeightsServer`): `GET /v000002/` answers the directory's
file names as JSON, `GET /v000002/model.safetensors` the file. A rollout worker that has no transfer
group, or must catch up after a restart, fetches the version named by an `http://.../v000002/` URI into
a local cache (`fetch_version`; `local_weights` takes any version URI), written under a temporary name and
renamed, then loads it as before. Files remain the archive and the fallback; live engines normally get
versions through the transfer group.
"""

from __future__ import annotations

import json
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import httpx


class _Handler(SimpleHTTPRequestHandler):
    """Static files from the weights root; a directory answers its file names as JSON."""

    def list_directory(self, path):
        names = sorted(p.name for p in Path(path).iterdir() if p.is_file())
        body = json.dumps(names).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return None

    def log_message(self, format, *args):  # noqa: A002  # quiet: one line per file is noise
        pass


class WeightsServer:
    """Serves `root` on `host:port` (0: a free port) from a daemon thread."""

    def __init__(self, root: Path, host: str = "0.0.0.0", port: int = 0, advertised_host: str | None = None):
        self.root = Path(root)
        self._server = ThreadingHTTPServer((host, port), partial(_Handler, directory=str(self.root)))
        self.advertised_host = advertised_host or (host if host != "0.0.0.0" else "127.0.0.1")
        self._thread = threading.Thread(target=self._server.serve_forever, name="weights-http", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> WeightsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def uri_for(self, version_dir: Path) -> str:
        return f"http://{self.advertised_host}:{self.port}/{Path(version_dir).relative_to(self.root).as_posix()}/"


def fetch_version(uri: str, cache: Path, timeout_s: float = 600.0) -> Path:
    """Download the version directory at `uri` into `cache` (once) and return the local directory."""
    base = uri if uri.endswith("/") else uri + "/"
    final = Path(cache) / Path(urlparse(base).path.rstrip("/")).name
    if (final / "config.json").exists():
        return final
    staging = final.with_name(final.name + ".part")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with httpx.Client(timeout=timeout_s) as http:
        for name in http.get(base).raise_for_status().json():
            if Path(name).name != name or name in ("", ".", ".."):
                raise ValueError(f"refusing file name {name!r} from {base}")
            with http.stream("GET", urljoin(base, name)) as response, open(staging / name, "wb") as out:
                response.raise_for_status()
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def local_weights(uri: str, cache: Path | None = None) -> Path:
    """`file:///a/b` or a plain path -> Path; `http(s)://host/v000002/` (the trainer host's weights server,
    no shared file system) -> a local copy fetched into `cache`; other schemes are not loadable."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri)
    if parsed.scheme in ("http", "https") and cache is not None:
        return fetch_version(uri, cache)
    raise ValueError(f"cannot load weights from {uri!r}: only file:// URIs and paths, or http(s):// from a weights "
                     "server, are supported")
