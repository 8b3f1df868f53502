"""Real (tiny) PyTorch training loops with the throughput hooks: the counts they spool, landed by
the node agent's spool and attributed, give `job_usage` its tokens/s per GPU and MFU.

Each test trains a small model on CPU for a few steps — a plain loop, a `lightning.Trainer`, a
Hugging Face `Trainer` — with the hook reporting into a spool; the spool is landed into a lake
with the job, its GPU allocation and the GPU's samples (an H100, so the peak comes from the
shipped `gpu_models`), and `job_usage` must give exactly what the spooled counts say.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collector.sources.spool import Spool
from collector.throughput import ThroughputReporter
from collector.throughput_callbacks import (
    TrainingThroughput,
    batch_samples,
    batch_tokens,
    count_parameters,
)
from tests.marts import rows as r
from warehouse.connection import connect
from warehouse.lake import Lake


def torch() -> Any:
    """torch, imported when a test first needs it (not at collection: 2 s in every worker)."""
    return pytest.importorskip("torch")


REPO = Path(__file__).resolve().parents[2]
JOB = "4242"
VOCAB, SEQ, BATCH, STEPS = 64, 16, 8, 5


def tiny_lm() -> Any:
    """A two-layer next-token model: embedding → MLP → logits over the vocabulary."""
    torch().manual_seed(0)
    return torch().nn.Sequential(
        torch().nn.Embedding(VOCAB, 32),
        torch().nn.Linear(32, 64),
        torch().nn.GELU(),
        torch().nn.Linear(64, VOCAB),
    )


def token_batches(n: int) -> list[Any]:
    generator = torch().Generator().manual_seed(1)
    return [torch().randint(0, VOCAB, (BATCH, SEQ), generator=generator) for _ in range(n)]


def spool_reporter(tmp_path: Path) -> tuple[Spool, ThroughputReporter]:
    spool = Spool(tmp_path / "spool")
    spool.open_inbox()
    return spool, ThroughputReporter(JOB, spool=spool.root, node="g001", reporter="rank0")


def attribute(tmp_path: Path, spool: Spool, started: float, ended: float) -> dict[str, Any]:
    """Land the spool into a lake with job JOB on one H100 over the training; its job_usage."""
    lake = tmp_path / "lake"
    landed = spool.land(Lake.at(lake), r.CLUSTER)
    assert landed.files >= 1 and landed.skipped_lines == 0
    start, end = int(started - r.T0_E) - 60, int(ended - r.T0_E) + 60
    con = r.build_lake(
        lake,
        samples=r.samples(range(start, end + 30, 30), engine_active=0.5),
        jobs=[r.job(JOB, start, end, gpus=1)],
        job_gpus=[r.job_gpu(JOB, start, end)],
    )
    return r.by_job(con)[JOB]


def spooled(tmp_path: Path) -> list[dict[str, Any]]:
    """The job's app_throughput rows in the lake, by time."""
    with connect(tmp_path / "lake") as con:
        table = con.sql(
            "SELECT * FROM app_throughput WHERE job_id = $job ORDER BY ts", params={"job": JOB}
        ).to_arrow_table()
    return table.to_pylist()


def expected_rates(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(tokens/s, MFU) from the spooled counts: one reporter, counters that only go up."""
    first, last = rows[0], rows[-1]
    span_s = (last["ts"] - first["ts"]).total_seconds()
    rate = (last["tokens_total"] - first["tokens_total"]) / span_s
    with connect(Path("/nonexistent")) as con:  # the shipped GPU table: the H100's peak
        [(peak_tflops,)] = con.sql(
            "SELECT peak_bf16_dense_tflops FROM gpu_models WHERE model = 'NVIDIA H100 80GB HBM3'"
        ).fetchall()
    return rate, 6 * last["model_params"] * rate / (1 * peak_tflops * 1e12)


def assert_usage_matches_the_counts(usage: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    rate, mfu = expected_rates(rows)
    assert rate > 0 and 0 < mfu < 1
    # The mart's span is a difference of epoch seconds as doubles (~1.7e9 s, spacing 2.4e-7 s)
    # and these spans can last a few hundredths of a second (the tiny models train fast): equal
    # to 1e-4, relative (a wrong formula is off by far more).
    assert usage["tokens_per_s_per_gpu"] == pytest.approx(rate, rel=1e-4)
    assert usage["mfu"] == pytest.approx(mfu, rel=1e-4)
    assert usage["app_throughput"] == pytest.approx(rate, rel=1e-4)  # tokens win


def train_step(model: Any, tokens: Any, lr: float = 0.1) -> Any:
    """One step of plain gradient descent, written out: `torch.optim`'s first optimizer imports
    torch._dynamo (1.1 CPU-s), which nothing here needs."""
    logits = model(tokens[:, :-1])
    loss = torch().nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    model.zero_grad()
    loss.backward()
    with torch().no_grad():
        for parameter in model.parameters():
            parameter -= lr * parameter.grad
    return loss


def test_a_plain_loop_reports_tokens_and_parameters_and_job_usage_gives_mfu(tmp_path):
    spool, reporter = spool_reporter(tmp_path)
    model = tiny_lm()
    started = time.time()
    with TrainingThroughput(model, reporter=reporter) as meter:
        for tokens in token_batches(STEPS):
            train_step(model, tokens)
            time.sleep(0.05)  # a measurable span on a fast machine
            meter.step(samples=tokens.shape[0], tokens=tokens.numel())
    usage = attribute(tmp_path, spool, started, time.time())

    rows = spooled(tmp_path)
    n_params = sum(p.numel() for p in model.parameters())  # 64·32 + 32·64+64 + 64·64+64
    assert n_params == VOCAB * 32 + (32 * 64 + 64) + (64 * VOCAB + VOCAB)
    # flushed after the first step (the rate runs from there) and when the loop ended
    assert [(row["tokens_total"], row["steps_total"], row["model_params"]) for row in rows] == [
        (BATCH * SEQ, 1, n_params),
        (STEPS * BATCH * SEQ, STEPS, n_params),
    ]
    assert usage["model_params"] == n_params
    assert_usage_matches_the_counts(usage, rows)


# Lightning's advice about CPU data workers; torch's pytree deprecations inside Lightning
@pytest.mark.slow  # ~10-17 s on the 2-core build machine (Lightning's start-up)
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_a_lightning_trainer_with_the_callback_gives_job_usage_its_mfu(tmp_path):
    lightning = pytest.importorskip("lightning")
    from collector.throughput_callbacks import lightning_callback

    class TinyLM(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = tiny_lm()

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            (tokens,) = batch
            logits = self.net(tokens[:, :-1])
            return torch().nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)
            )

        def configure_optimizers(self) -> Any:
            return torch().optim.SGD(self.parameters(), lr=0.1)

    spool, reporter = spool_reporter(tmp_path)
    data = torch().utils.data.TensorDataset(torch().cat(token_batches(STEPS)))
    loader = torch().utils.data.DataLoader(data, batch_size=BATCH)
    module = TinyLM()
    trainer = lightning.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path / "lightning",
        callbacks=[lightning_callback(tokens=lambda batch: batch[0].numel(), reporter=reporter)],
    )
    started = time.time()
    trainer.fit(module, loader)
    usage = attribute(tmp_path, spool, started, time.time())

    rows = spooled(tmp_path)
    assert trainer.global_step == STEPS
    assert [(row["samples_total"], row["tokens_total"], row["steps_total"]) for row in rows] == [
        (BATCH, BATCH * SEQ, 1),
        (STEPS * BATCH, STEPS * BATCH * SEQ, STEPS),
    ]
    assert usage["model_params"] == count_parameters(module)
    assert_usage_matches_the_counts(usage, rows)


@pytest.mark.slow  # ~10 s on the 2-core build machine (transformers' import)
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
def test_a_hugging_face_trainer_with_the_callback_gives_job_usage_its_mfu(tmp_path):
    transformers = pytest.importorskip("transformers")
    from collector.throughput_callbacks import hf_callback

    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=16, n_layer=1, n_head=2
    )
    torch().manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    examples = [{"input_ids": t, "labels": t} for t in torch().cat(token_batches(STEPS))]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"),
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        include_num_input_tokens_seen=True,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    spool, reporter = spool_reporter(tmp_path)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=examples, callbacks=[hf_callback(reporter=reporter)]
    )
    started = time.time()
    trainer.train()
    usage = attribute(tmp_path, spool, started, time.time())

    rows = spooled(tmp_path)
    assert trainer.state.num_input_tokens_seen == STEPS * BATCH * SEQ
    assert [(row["tokens_total"], row["steps_total"]) for row in rows] == [
        (BATCH * SEQ, 1),
        (STEPS * BATCH * SEQ, STEPS),
    ]
    assert usage["model_params"] == model.num_parameters() == count_parameters(model)
    assert_usage_matches_the_counts(usage, rows)


def test_batch_counts_read_tensors_sequences_and_hugging_face_mappings():
    ids = torch().ones((4, 10), dtype=torch().long)
    mask = torch().ones((4, 10), dtype=torch().long)
    mask[:, 7:] = 0  # padding

    assert batch_samples(ids) == 4
    assert batch_samples([ids, ids]) == 4
    assert batch_samples({"input_ids": ids}) == 4
    assert batch_samples(["no tensor"]) is None
    assert batch_tokens({"input_ids": ids, "attention_mask": mask}) == 28  # padding is no token
    assert batch_tokens({"input_ids": ids}) == 40
    assert batch_tokens(ids) is None  # not a token batch: say so, do not guess


def test_the_module_imports_no_training_framework():
    code = (
        "import sys\n"
        "import collector.throughput_callbacks\n"
        "print(sorted({'torch', 'lightning', 'transformers'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_reports_are_timed_from_the_end_of_the_first_step(tmp_path):
    now = [1_700_000_000.0]
    spool = Spool(tmp_path / "spool")
    spool.open_inbox()
    reporter = ThroughputReporter(JOB, spool=spool.root, clock=lambda: now[0])
    meter = TrainingThroughput(params=1000, reporter=reporter)
    meter.step(tokens=100)
    first = sorted((spool.root / "app_throughput").iterdir())
    now[0] += 10
    meter.step(tokens=100)
    meter.close()

    assert len(first) == 1  # flushed at once after step 1, not 30 s later
    assert len(list((spool.root / "app_throughput").iterdir())) == 2
