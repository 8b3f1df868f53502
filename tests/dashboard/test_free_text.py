"""Free text from the lake (job, user, account, partition names, finding messages,
recommendations) is shown as text on every page, never as Markdown (security issue #22, LOW 12).

The lake's jobs are renamed to hostile names before attribution; every element Streamlit draws
as Markdown (titles, captions, alert boxes, Markdown, expander labels) is rendered with a
CommonMark parser and must hold the name as literal text, with no link, emphasis or HTML.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from app.bench.dashboard_timing import PAGES
from app.markdown_text import WORD_JOINER, md
from collector.sim import SimConfig, simulate
from tests.dashboard.factories import make_finding, make_recommendation, write_rows
from warehouse.attribution import AttributionConfig, attribute
from warehouse.connection import connect
from warehouse.lake import Lake

ENTRY = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
HOSTILE = "**boss** [click](http://evil) <b>x</b> $x$ :red[y] see https://evil.example"
HOSTILE_USER = "_eve_"
CHANNEL = "<!channel> `rm`"
PARSER = MarkdownIt("commonmark")


@pytest.fixture(scope="module")
def hostile_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small simulated lake whose jobs all carry hostile names, partitions and users."""
    root = tmp_path_factory.mktemp("hostile")
    simulate(SimConfig(gpus=8, days=1, seed=5), Lake.at(root))
    for path in sorted((root / "jobs").rglob("*.parquet")):
        table = pq.read_table(path)
        n = table.num_rows
        for column, value in (
            ("job_name", HOSTILE),
            ("partition", CHANNEL),
            ("user", HOSTILE_USER),
        ):
            i = table.schema.get_field_index(column)
            table = table.set_column(i, table.schema.field(i), pa.array([value] * n, pa.string()))
        pq.write_table(table, path)
    con = connect(root)
    attribute(con, root, AttributionConfig())
    job_id = str(
        con.sql("SELECT job_id FROM job_usage ORDER BY idle_gpu_h DESC LIMIT 1").fetchall()[0][0]
    )
    write_rows(
        root,
        "findings",
        [make_finding("f-x", job_id=job_id, user=HOSTILE_USER, message=f"{HOSTILE} idle")],
        "hostile",
    )
    write_rows(
        root,
        "recommendations",
        [make_recommendation("r-x", kind="idle_cancel_policy", scope=f"partition {CHANNEL}")],
        "hostile",
    )
    return root, job_id


def markdown_bodies(at: AppTest) -> list[str]:
    """Every text of the page that Streamlit renders as Markdown."""
    bodies: list[str] = []
    for kind in (
        "title",
        "header",
        "subheader",
        "markdown",
        "caption",
        "info",
        "warning",
        "error",
        "success",
    ):
        bodies += [str(e.value) for e in getattr(at, kind)]
    bodies += [str(e.label) for e in at.expander]
    return bodies


def rendered(body: str) -> str:
    return PARSER.renderInline(body)


def shown(body: str) -> str:
    """The text a reader sees of `body` (the word joiners that break addresses are invisible)."""
    return html.unescape(rendered(body)).replace(WORD_JOINER, "")


# What GitHub-flavoured Markdown turns into a link without any Markdown around it (the
# CommonMark parser here does not): www. after a start, a space, ( * _ ~ too
GFM_AUTOLINK = re.compile(r"(?i)https?://|www\.|[\w.+-]@[\w-]+\.\w")


@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_shows_lake_text_as_text(hostile_lake, monkeypatch, page):
    root, job_id = hostile_lake
    monkeypatch.setenv("GPULEDGER_LAKE", str(root))
    monkeypatch.delenv("GPULEDGER_DASHBOARD_MANAGERS", raising=False)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.session_state["job_id_input"] = job_id
    at.switch_page(PAGES[page])
    at.run()

    assert not at.exception, at.exception
    for body in markdown_bodies(at):
        out = rendered(body)
        assert "<a " not in out, (page, body)
        assert "<strong>boss" not in out and "<em>eve" not in out, (page, body)
        assert "<b>" not in out and "<code>rm" not in out, (page, body)
        assert "$x$" not in body and ":red[" not in body, (page, body)  # maths, colour
        assert not GFM_AUTOLINK.search(html.unescape(out)), (page, body)  # bare addresses


def test_the_job_page_names_the_job_literally(hostile_lake, monkeypatch):
    root, job_id = hostile_lake
    monkeypatch.setenv("GPULEDGER_LAKE", str(root))
    monkeypatch.delenv("GPULEDGER_DASHBOARD_MANAGERS", raising=False)
    at = AppTest.from_file(str(ENTRY), default_timeout=60)
    at.session_state["job_id_input"] = job_id
    at.switch_page(PAGES["job"])
    at.run()

    title = shown(at.title[0].value)
    assert title == f"Job {job_id} · {HOSTILE}"
    caption = shown(at.caption[0].value) if at.caption else ""
    assert (
        caption.startswith(f"cluster sim · {HOSTILE_USER} (") and f"partition {CHANNEL}" in caption
    )


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE,
        CHANNEL,
        "a\\*b",
        "line\n# heading",
        "1. not a list",
        "&amp; stays",
        "x_y_z",
        "sign in at HTTPS://evil.example/login or www.evil.example or bob@evil.com",
        "x_www.evil.example/login",
    ],
)
def test_md_renders_back_to_the_text_itself(text):
    assert shown(md(text)) == " ".join(text.splitlines())
    assert WORD_JOINER not in md("use --time=1-00:00:00 --cpus-per-gpu=8 a@b")  # copied along
    # a job named so was drawn with live links (GFM finds addresses after the escapes)
    assert not GFM_AUTOLINK.search(html.unescape(rendered(md(text))))
