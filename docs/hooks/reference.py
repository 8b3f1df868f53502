"""mkdocs hook: add the generated references (reference/cli.md, reference/configuration.md,
reference/pipeline.md).

They are written from the code at every build (`app/reference_docs.py`), never committed, so
they cannot drift from it. Registered in mkdocs.yml under `hooks:`.
"""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

from app.reference_docs import cli_reference, config_reference, pipeline_reference

PAGES = {
    "reference/cli.md": cli_reference,
    "reference/configuration.md": config_reference,
    "reference/pipeline.md": pipeline_reference,
}


def on_files(files: Files, config: Any) -> Files:
    for uri, render in PAGES.items():
        files.append(File.generated(config, uri, content=render()))
    return files
