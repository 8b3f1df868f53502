"""Golden files of rendered messages (tests/alerts/golden/). Regenerate after a reviewed template
change with `UPDATE_GOLDEN=1 pytest tests/alerts/test_golden.py`, then read the diff."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from app.alerts.directory import Person
from app.alerts.findings import load_findings
from app.alerts.plan import Notice, Stage
from app.alerts.render import DigestRow, Rendered, render_digest, render_notice
from warehouse.connection import connect

from .factories import NOW, standard_lake

GOLDEN = Path(__file__).with_name("golden")
IDLE = ("idle_job", "idle_gpu")


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    lake = tmp_path_factory.mktemp("golden") / "lake"
    standard_lake(lake)
    return lake


@pytest.fixture(scope="module")
def lake_con(lake):
    """One connection over the standard lake, which the tests only read."""
    with connect(lake) as con:
        yield con


@pytest.fixture(scope="module")
def findings(lake_con):
    since = NOW - dt.timedelta(days=7)
    return {f.finding_id: f for f in load_findings(lake_con, since)}


def check(name: str, rendered: Rendered) -> None:
    actual = {
        f"{name}.subject.txt": rendered.subject + "\n",
        f"{name}.txt": rendered.text,
        f"{name}.html": rendered.html,
        f"{name}.slack.json": json.dumps(
            {"text": rendered.slack_text, "blocks": rendered.blocks}, indent=2, ensure_ascii=False
        )
        + "\n",
    }
    for filename, text in actual.items():
        path = GOLDEN / filename
        if os.environ.get("UPDATE_GOLDEN"):
            path.write_text(text, encoding="utf-8")
        assert path.read_text(encoding="utf-8") == text, f"{filename} differs from the golden file"


def test_findings_older_than_the_lookback_are_left_out(lake_con):
    # every standard finding was detected at NOW - 5 min
    assert len(load_findings(lake_con, NOW - dt.timedelta(minutes=5))) == 4
    assert load_findings(lake_con, NOW - dt.timedelta(minutes=4)) == []


def test_the_sql_gives_the_context_the_messages_show(findings):
    idle = findings["f-idle"]
    assert (idle.user_rank, idle.users_ranked) == (2, 2)  # bob's 20 GPU-h rank first
    assert (idle.gpus, idle.nodes, idle.job_name, idle.interactive) == (
        4,
        ("g001",),
        "train-llm",
        False,
    )
    assert idle.job_running and not findings["f-over"].job_running
    assert findings["f-xid"].is_hardware and findings["f-xid"].user_rank is None


def test_owner_final_notice(findings):
    alice = Person("alice", "alice@physics.example.org", "U0ALICE", "Alice")
    notice = Notice(findings["f-idle"], Stage.FINAL, True, False, action_at=NOW)
    check("owner_final_notice", render_notice(notice, alice, "owner", IDLE))


def test_manager_copy(findings):
    carol = Person("carol", "carol@example.org", "U0CAROL")
    notice = Notice(findings["f-idle"], Stage.FINAL, True, False)
    check("manager_final_notice", render_notice(notice, carol, "manager", IDLE))


def test_overallocation_notice(findings):
    bob = Person("bob", "bob@example.org")
    notice = Notice(findings["f-over"], Stage.NOTICE, False, False)
    check("owner_overallocated", render_notice(notice, bob, "owner", IDLE))


def test_hardware_alert_to_admins_in_test_mode(findings):
    admin = Person(None, "admin@example.org", name="admin")
    notice = Notice(findings["f-xid"], Stage.NOTICE, False, True)
    check("admin_hardware_test_mode", render_notice(notice, admin, "admin", IDLE))


def test_digest(findings):
    notices = [
        Notice(findings["f-idle"], Stage.FINAL, True, False),
        Notice(findings["f-over"], Stage.NOTICE, False, False),
        Notice(findings["f-xid"], Stage.NOTICE, False, False),
    ]
    check("digest", render_digest([DigestRow.of(n) for n in notices], NOW))


def test_markup_in_findings_is_escaped(findings):
    import dataclasses

    nasty = dataclasses.replace(findings["f-over"], message="<script>x</script> & <@U123>")
    r = render_notice(
        Notice(nasty, Stage.NOTICE, False, False), Person("bob", "b@x"), "owner", IDLE
    )
    assert "<script>" not in r.html and "&lt;script&gt;" in r.html
    assert r.blocks[1]["text"]["text"] == "&lt;script&gt;x&lt;/script&gt; &amp; &lt;@U123&gt;"


def test_only_a_waste_detectors_hours_are_called_wasted(findings):
    import dataclasses

    # job_without_data's hours are those no telemetry covered: at stake, not wasted
    unseen = dataclasses.replace(findings["f-over"], detector="job_without_data")
    for finding, label in ((findings["f-over"], "Wasted:"), (unseen, "At stake:")):
        r = render_notice(
            Notice(finding, Stage.NOTICE, False, False), Person("bob", "b@x"), "owner", IDLE
        )
        assert f"{label:<12}{finding.gpu_h_at_stake:,.1f} GPU-hours so far" in r.text
        assert f'<th align="left">{label[:-1]}</th>' in r.html
    assert "Wasted" not in r.text + r.html + json.dumps(r.blocks)


def test_interactive_session_is_addressed_gently(findings):
    import dataclasses

    session = dataclasses.replace(
        findings["f-idle"], interactive=True, job_name="jupyter", message="1 GPU idle for 3 h"
    )
    alice = Person("alice", "alice@physics.example.org", "U0ALICE", "Alice")
    rendered = render_notice(Notice(session, Stage.NOTICE, True, False), alice, "owner", IDLE)
    check("owner_interactive_notice", rendered)
    assert "No rush if you are still working in it" in rendered.text


def test_an_interactive_jobs_other_findings_do_not_say_it_looks_unused(findings):
    # issue #21: a stranded-GPU finding (CPU and memory requests) about an interactive job
    # opened "Your interactive session looks unused"; each finding's text is its own detector's
    import dataclasses

    stranded = dataclasses.replace(
        findings["f-over"],
        detector="stranded_gpus",
        interactive=True,
        message="Job 1092 (lena): 2 GPUs with 24 CPUs left 1 of the node's 8 GPUs unusable",
    )
    lena = Person("lena", "lena@x", None, "Lena")
    rendered = render_notice(Notice(stranded, Stage.NOTICE, False, False), lena, "owner", IDLE)
    for body in (rendered.text, rendered.html):
        assert "looks unused" not in body
        assert "No rush if you are still working in it" not in body
    assert "gpuledger noticed something about your job" in rendered.text
    assert "left 1 of the node's 8 GPUs unusable" in rendered.text


def test_a_multi_line_message_makes_a_one_line_subject(findings):
    import dataclasses

    from app.alerts.smtp import compose_email

    odd = dataclasses.replace(findings["f-over"], message="line one\nBcc: evil@x\r\n" + "x" * 300)
    r = render_notice(Notice(odd, Stage.NOTICE, False, False), Person("bob", "b@x"), "owner", IDLE)
    assert "\n" not in r.subject and len(r.subject) == 200
    assert r.subject.startswith("[gpuledger] Notice: line one Bcc: evil@x xxx")
    msg = compose_email(sender="g@x", to=["b@x"], subject=r.subject, text=r.text, html=r.html)
    assert msg["Bcc"] is None


def test_a_finding_without_user_takes_the_jobs_owner_and_rank(tmp_path):
    from .factories import finding, job, land

    lake = tmp_path / "lake"
    land(
        lake,
        "findings",
        [
            finding(user=None, account=None, gpu_h_at_stake=5.0),  # job 4242 is alice's
            finding(finding_id="f-b", subject_id="9", job_id="9", user="bob", gpu_h_at_stake=3.0),
            finding(finding_id="f-c", subject_id="8", job_id="8", user="bob", gpu_h_at_stake=1.0),
        ],
    )
    land(lake, "jobs", [job()])
    got = {
        f.finding_id: (f.user, f.account, f.user_rank, f.users_ranked, f.user_gpu_h_at_stake)
        for f in load_findings(connect(lake), NOW - dt.timedelta(days=1))
    }
    assert got == {
        "f-idle": ("alice", "physics", 1, 2, 5.0),
        "f-b": ("bob", "physics", 2, 2, 4.0),
        "f-c": ("bob", "physics", 2, 2, 4.0),
    }


def _slack_texts(blocks: object) -> list[str]:
    """Every `text` string of a Block Kit structure."""
    if isinstance(blocks, dict):
        own = [blocks["text"]] if isinstance(blocks.get("text"), str) else []
        return own + [t for v in blocks.values() for t in _slack_texts(v)]
    if isinstance(blocks, list):
        return [t for v in blocks for t in _slack_texts(v)]
    return []


def test_slack_messages_show_hostile_names_as_text(findings):
    import dataclasses
    import re

    name = "**boss** <!channel> _x_ ~y~ `z`"
    nasty = dataclasses.replace(
        findings["f-idle"], job_name=name, message=f"{name} <http://evil|click>"
    )
    alice = Person("alice", "alice@physics.example.org", "U0ALICE", "Alice")
    notice = render_notice(Notice(nasty, Stage.NOTICE, False, False), alice, "owner", IDLE)
    digest = render_digest([DigestRow.of(Notice(nasty, Stage.NOTICE, False, False))], NOW)

    for r in (notice, digest):
        texts = [r.slack_text, *_slack_texts(r.blocks)]
        for text in texts:
            assert "<!channel>" not in text and "<http" not in text, text
            # a formatting character touching the name's letters could pair up: each is fenced
            assert not re.search(r"\*boss|boss\*|_x|x_|~y|y~|`z|z`", text), text
        shown = [t.replace("\u200b", "") for t in texts]
        assert any("**boss** &lt;!channel&gt; _x_ ~y~ `z`" in t for t in shown)
    # the message's own formatting is kept
    job_field = notice.blocks[2]["fields"][0]["text"]
    assert job_field.startswith("*Job*\n")
