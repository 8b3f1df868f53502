"""Training-loop hooks that report throughput and the model's size through `collector.throughput`.

Three ways in, one behaviour: count the samples, tokens and optimizer steps a training process
works through, give the model's parameter count, and let `collector.throughput` spool them for
the node agent (the lake's `app_throughput`; `job_usage` turns them into tokens/s per GPU and MFU).

    # a plain PyTorch loop
    from collector.throughput_callbacks import TrainingThroughput
    with TrainingThroughput(model) as meter:
        for batch in loader:
            ...
            meter.step(samples=batch.shape[0], tokens=batch.numel())

    # PyTorch Lightning
    from collector.throughput_callbacks import lightning_callback
    trainer = lightning.Trainer(callbacks=[lightning_callback()])

    # Hugging Face Trainer (tokens from `num_input_tokens_seen`: set
    # `TrainingArguments(include_num_input_tokens_seen=True)`)
    from collector.throughput_callbacks import hf_callback
    trainer = transformers.Trainer(..., callbacks=[hf_callback()])

The rate is counted from the end of the first step (the first report is flushed there), so a
first step's warm-up (allocation, compilation) does not lower it; the last report is flushed when
training ends. The parameter count is every parameter of the model (`model.parameters()`, each
tensor once); give `params=` yourself where that is not the model's size — a sharded model
(FSDP, DeepSpeed ZeRO-3) holds a shard per process, and a mixture of experts should give its
active parameters per token.

torch, lightning and transformers are imported only when the hook that needs them is built, so
importing this module costs nothing and needs none of them (`pip install 'gpuledger[throughput]'`
in the training environment brings them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Protocol

from collector.throughput import ThroughputReporter, default_reporter

__all__ = [
    "BatchCount",
    "TrainingThroughput",
    "batch_samples",
    "batch_tokens",
    "count_parameters",
    "hf_callback",
    "lightning_callback",
]

BatchCount = Callable[[Any], float | None]  # a batch → its samples or tokens (None: not known)


class _HasParameters(Protocol):
    def parameters(self) -> Iterable[Any]: ...


def count_parameters(model: _HasParameters) -> int:
    """The model's parameters: the sum of `numel()` over `model.parameters()` (each tensor once)."""
    return int(sum(int(p.numel()) for p in model.parameters()))


def _first_tensor(batch: Any) -> Any:
    """The first value with a `shape` in a tensor, a sequence of them or a mapping of them."""
    if hasattr(batch, "shape"):
        return batch
    values: Iterable[Any] = ()
    if isinstance(batch, Mapping):
        values = batch.values()
    elif isinstance(batch, list | tuple):
        values = batch
    for value in values:
        if hasattr(value, "shape"):
            return value
    return None


def batch_samples(batch: Any) -> float | None:
    """The samples of a batch: the leading size of its first tensor (None: no tensor in it)."""
    tensor = _first_tensor(batch)
    if tensor is None or len(tensor.shape) == 0:
        return None
    return float(tensor.shape[0])


def batch_tokens(batch: Any) -> float | None:
    """The tokens of a Hugging Face style batch (a mapping with `input_ids`): the ones its
    `attention_mask` keeps, else every id. None for other batches: give `tokens=` yourself."""
    if not isinstance(batch, Mapping) or not hasattr(batch.get("input_ids"), "numel"):
        return None
    mask = batch.get("attention_mask")
    if mask is not None and hasattr(mask, "sum"):
        return float(mask.sum())
    return float(batch["input_ids"].numel())


class TrainingThroughput:
    """Counts a training loop's work and reports it (with the model's size) to a reporter.

    Args:
        model: the model trained (its parameters are counted); None with `params` or neither.
        params: the parameter count to report instead of counting `model`'s.
        reporter: where to report (default: this process's, built from the environment:
            the job from SLURM_JOB_ID/POD_NAME, the spool from GPULEDGER_SPOOL).
        job_id: the job to report for (default: the reporter's).
    """

    def __init__(
        self,
        model: _HasParameters | None = None,
        *,
        params: int | None = None,
        reporter: ThroughputReporter | None = None,
        job_id: str | None = None,
    ) -> None:
        self.params = (
            params
            if params is not None
            else (count_parameters(model) if model is not None else None)
        )
        self.reporter = reporter if reporter is not None else default_reporter()
        self.job_id = job_id
        self.steps_seen = 0

    def step(
        self, *, samples: float | None = None, tokens: float | None = None, steps: float = 1
    ) -> None:
        """Count one step's work (`steps` optimizer steps, default 1). The first is flushed at
        once: the rate runs from its end."""
        self.reporter.report(
            samples=samples, tokens=tokens, steps=steps, job_id=self.job_id, params=self.params
        )
        self.steps_seen += 1
        if self.steps_seen == 1:
            self.reporter.flush()

    def close(self) -> None:
        """Flush what was counted since the last flush (training ended)."""
        self.reporter.flush()

    def __enter__(self) -> TrainingThroughput:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def lightning_callback(
    *,
    params: int | None = None,
    samples: BatchCount | None = batch_samples,
    tokens: BatchCount | None = batch_tokens,
    reporter: ThroughputReporter | None = None,
    job_id: str | None = None,
) -> Any:
    """A `lightning.pytorch.Callback` reporting each training batch of this process.

    `samples` and `tokens` count a batch (defaults: `batch_samples`, `batch_tokens`); steps
    are the trainer's optimizer steps (`global_step`). Parameters are counted on the
    LightningModule when training starts unless `params` is given. Every process (rank)
    reports its own batches; `job_usage` adds the ranks up.
    """
    from lightning.pytorch import Callback  # lazily: the base import needs no lightning

    class ThroughputCallback(Callback):  # type: ignore[misc]  # lightning is not type-checked
        def __init__(self) -> None:
            super().__init__()
            self.meter: TrainingThroughput | None = None
            self.last_step = 0

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            counted = params if params is not None else count_parameters(pl_module)
            self.meter = TrainingThroughput(params=counted, reporter=reporter, job_id=job_id)
            self.last_step = int(trainer.global_step)

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            if self.meter is None:
                return
            step = int(trainer.global_step)
            self.meter.step(
                samples=samples(batch) if samples else None,
                tokens=tokens(batch) if tokens else None,
                steps=max(step - self.last_step, 0),
            )
            self.last_step = step

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            if self.meter is not None:
                self.meter.close()

    return ThroughputCallback()


def hf_callback(
    *,
    params: int | None = None,
    reporter: ThroughputReporter | None = None,
    job_id: str | None = None,
) -> Any:
    """A `transformers.TrainerCallback` reporting the Trainer's optimizer steps and tokens.

    Tokens come from `state.num_input_tokens_seen` (set
    `TrainingArguments(include_num_input_tokens_seen=True)`), a count over every process, so
    only the main process (`is_world_process_zero`) reports. Parameters are counted on the
    model when training begins unless `params` is given.
    """
    from transformers import TrainerCallback  # lazily: the base import needs no transformers

    class ThroughputTrainerCallback(TrainerCallback):  # type: ignore[misc]  # not type-checked
        def __init__(self) -> None:
            super().__init__()
            self.meter: TrainingThroughput | None = None
            self.tokens_seen = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not state.is_world_process_zero:
                return
            model = kwargs.get("model")
            counted = params
            if counted is None and model is not None:
                counted = count_parameters(model)
            self.meter = TrainingThroughput(params=counted, reporter=reporter, job_id=job_id)
            self.tokens_seen = int(state.num_input_tokens_seen or 0)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.meter is None:
                return
            seen = int(state.num_input_tokens_seen or 0)
            new_tokens = seen - self.tokens_seen if seen > self.tokens_seen else None
            self.tokens_seen = max(seen, self.tokens_seen)
            self.meter.step(tokens=new_tokens, steps=1)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.meter is not None:
                self.meter.close()

    return ThroughputTrainerCallback()
