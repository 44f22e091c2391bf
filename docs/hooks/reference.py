"""MkDocs hook: the configuration and CLI references, generated from the code when the site is built.

Nothing is written into `docs/`: the pages exist only in the build (`seamlessflow.reference` renders them).
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from seamlessflow.cli.main import cli
from seamlessflow.reference import cli_markdown, configuration_markdown

PAGES = {
    "reference/configuration.md": configuration_markdown,
    "reference/cli.md": lambda: cli_markdown(cli, "seamlessflow"),
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files
