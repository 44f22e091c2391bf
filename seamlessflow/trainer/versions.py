"""Where the trainer's weight versions are found: the URI it announces, and the newest this run announced.

Why: with no file system shared between nodes, an engine on another host can only load a version from the
leader's weights server (`seamlessflow.weights.http_files`), so the announcement names an `http://` URI
when the trainer serves; and a trainer restarted on a node without its work dir cannot number on from the
versions on disk, so it numbers on from the newest version announced on the weights topic (versions never
go backwards).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.reader import read_topic
from seamlessflow.messages import WeightVersion
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.weights.http_files import WeightsServer


def weights_server(options: TrainerOptions, root: Path) -> WeightsServer | None:
    """The leader's server for its weights root when it serves (`TrainerOptions.serves_weights`), not started."""
    if not options.serves_weights():
        return None
    host = options.advertised_weights_host()
    return WeightsServer(root, host=options.weights_bind or host, port=options.weights_port, advertised_host=host)


def version_uri(files: Path, server: WeightsServer | None) -> str:
    """What engines load the version in `files` from: nothing when it has no files (transfer only), its
    `http://` URI on the weights server, or its `file://` URI when the trainer does not serve."""
    if not files.exists():
        return ""
    return server.uri_for(files) if server is not None else files.as_uri()


def uri_name(uri: str) -> str:
    """The name of the version directory a URI names (`file:///w/v000002-ab12cd`, `http://h:1/v000002-ab12cd/`)."""
    return PurePosixPath(unquote(urlparse(uri).path).rstrip("/")).name


def newest_announced(settings: Settings, codec: Codec, topic: str, trainer_id: str) -> WeightVersion | None:
    """The newest version this trainer announced for this run (the weights topic is compacted per run)."""
    newest = None
    for record in read_topic(settings, topic, codec):
        message = record.message
        if (isinstance(message, WeightVersion) and (message.team, message.run) == (settings.team, settings.run)
                and message.trainer_id == trainer_id and (newest is None or message.version > newest.version)):
            newest = message
    return newest
