"""Version directories over HTTP, so a worker on another host needs no shared file system.

The trainer's host serves its weights root (`WeightsServer`): `GET /v000002/` answers the directory's
file names as JSON, `GET /v000002/model.safetensors` the file. A rollout worker that has no transfer
group, or must catch up after a restart, fetches the version named by an `http://.../v000002/` URI into
a local cache (`fetch_version`; `local_weights` takes any version URI), written under a temporary name and
renamed, then loads it as before. Files remain the archive and the fallback; live engines normally get
versions through the transfer group.

A worker that sees the trainer's directory itself (the same host, or a shared directory) must not copy it:
the listing names the directory's path (`X-Weights-Path`) and the server's token (`X-Weights-Server`), which
`start` writes into the served root (`.weights-server`). The path is used in place only when the token read
there is this server's, so a directory of the same name on another host (a stale one, another run's) is
never mistaken for the served one.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

import httpx

TOKEN_FILE = ".weights-server"
PATH_HEADER, TOKEN_HEADER = "X-Weights-Path", "X-Weights-Server"


class _Handler(SimpleHTTPRequestHandler):
    """Static files from the weights root; a directory answers its file names as JSON, with its local path
    and the server's token (see the module's docstring)."""

    def __init__(self, *args: Any, token: str, **kwargs: Any) -> None:
        self.token = token
        super().__init__(*args, **kwargs)

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        names = sorted(p.name for p in Path(path).iterdir() if p.is_file() and p.name != TOKEN_FILE)
        body = json.dumps(names).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header(PATH_HEADER, json.dumps(str(Path(path).resolve())))  # JSON: any path fits a header
        self.send_header(TOKEN_HEADER, self.token)
        self.end_headers()
        self.wfile.write(body)
        return None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  # quiet: one line per file is noise
        pass


class WeightsServer:
    """Serves `root` on `host:port` (0: a free port) from a daemon thread."""

    def __init__(self, root: Path, host: str = "0.0.0.0", port: int = 0, advertised_host: str | None = None):
        self.root = Path(root)
        self.token = secrets.token_hex(16)
        self._server = ThreadingHTTPServer((host, port), partial(_Handler, directory=str(self.root), token=self.token))
        self.advertised_host = advertised_host or (host if host != "0.0.0.0" else "127.0.0.1")
        self._thread = threading.Thread(target=self._server.serve_forever, name="weights-http", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> WeightsServer:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / TOKEN_FILE).write_text(self.token)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for serve_forever, which a server never started lacks
            self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://{self.advertised_host}:{self.port}/"

    def uri_for(self, version_dir: Path) -> str:
        return f"{self.url}{Path(version_dir).relative_to(self.root).as_posix()}/"


def _whole(directory: Path) -> bool:
    """A version directory is there: a model's (config.json) or a LoRA adapter's (adapter_config.json)."""
    return (directory / "config.json").exists() or (directory / "adapter_config.json").exists()


def fetch_version(uri: str, cache: Path, timeout_s: float = 600.0) -> Path:
    """Download the version directory at `uri` into `cache` (once) and return the local directory."""
    base = _base(uri)
    final = Path(cache) / Path(urlparse(base).path.rstrip("/")).name
    if _whole(final):
        return final
    with httpx.Client(timeout=timeout_s) as http:
        return _download(http, base, _listing(http, base).json(), final)


def _base(uri: str) -> str:
    return uri if uri.endswith("/") else uri + "/"


def _listing(http: httpx.Client, base: str) -> httpx.Response:
    response = http.get(base).raise_for_status()
    for name in response.json():
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"refusing file name {name!r} from {base}")
    return response


def _download(http: httpx.Client, base: str, names: list[str], final: Path) -> Path:
    """The files into `final`, under a temporary name first: an engine never sees half a version."""
    staging = final.with_name(final.name + ".part")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in names:
        with http.stream("GET", urljoin(base, name)) as response, open(staging / name, "wb") as out:
            response.raise_for_status()
            for chunk in response.iter_bytes(1 << 20):
                out.write(chunk)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def served_here(listing: httpx.Response) -> Path | None:
    """The served directory itself when this machine sees it (the server's token is in its root), else None."""
    path, token = listing.headers.get(PATH_HEADER), listing.headers.get(TOKEN_HEADER)
    if not path or not token:
        return None  # a server without the headers: always copy
    directory = Path(json.loads(path))
    try:
        seen = (directory.parent / TOKEN_FILE).read_text().strip()
    except OSError:
        return None
    return directory if seen == token and _whole(directory) else None


def resolve_version(uri: str, cache: Path, timeout_s: float = 600.0) -> Path:
    """An `http(s)://` version URI as a local directory: the trainer's own when this machine sees it (no
    copy), else the copy in `cache` (fetched once)."""
    base = _base(uri)
    final = Path(cache) / Path(urlparse(base).path.rstrip("/")).name
    with httpx.Client(timeout=timeout_s) as http:
        try:
            listing = _listing(http, base)
        except httpx.HTTPError:
            if _whole(final):
                return final  # fetched before; the server is gone (a trainer restarting) but the copy is whole
            raise
        here = served_here(listing)
        if here is not None:
            return here
        if _whole(final):
            return final
        return _download(http, base, listing.json(), final)


def prune_copies(cache: Path, keep: int, protect: Path) -> None:
    """Deletes fetched copies beyond the newest `keep` (never `protect`, the one the engine holds): a worker's
    disk holds a few versions, not the run's history (a 7B version in bf16 is ~15 GB)."""
    copies = sorted(p for p in Path(cache).glob("v[0-9]*") if p.is_dir() and p.name[1:7].isdigit()  # v000002[-x]
                    and "." not in p.name)
    for old in copies[:-keep] if keep > 0 else []:
        if old != protect:
            shutil.rmtree(old, ignore_errors=True)


def local_weights(uri: str, cache: Path | None = None) -> Path:
    """Where a rollout worker loads a version from, whatever its URI: `file:///a/b` or a plain path -> that
    path; `http(s)://host/v000002/` (the trainer host's weights server) -> the trainer's directory when this
    machine sees it, else a local copy fetched into `cache`; other schemes are not loadable."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri)
    if parsed.scheme in ("http", "https") and cache is not None:
        return resolve_version(uri, cache)
    raise ValueError(f"cannot load weights from {uri!r}: only file:// URIs and paths, or http(s):// from a weights "
                     "server, are supported")
