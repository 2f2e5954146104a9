"""Trainer options from issue 6: WSD, z-loss, QK-norm, activation checkpointing, compile,
callbacks + console line + eval hook, healthy-protected keep-last-K, async save, MFU, recipes."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from pretrain.checkpoint import dcp as ckpt
from pretrain.distributed import ProcessInfo
from pretrain.errors import ConfigError
from pretrain.model import ModelConfig, Transformer, flops_per_token, init_weights, num_params
from pretrain.model.recipes import debug_tiny, llama_1b, llama_125m
from pretrain.train.callbacks import Callback, StepRecord, console_line
from pretrain.train.config import CheckpointConfig, ComputeConfig, OptimConfig
from pretrain.train.metrics import PEAK_FLOPS, mfu
from pretrain.train.optim import lr_at
from pretrain.train.parallel import build_model
from pretrain.train.recipes import get_train_recipe, sequences_for_tokens
from pretrain.train.step import language_model_loss
from tests.helpers.training import VOCAB, losses, make_config, make_packed, read_jsonl, run


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_packed(tmp_path_factory.mktemp("packed") / "packed_tokens")


def with_sections(cfg, **changes):
    """``with_sections(cfg, optim={"schedule": "wsd"})``: replace fields inside sections."""
    return cfg.replace(
        **{name: dataclasses.replace(getattr(cfg, name), **kw) for name, kw in changes.items()}
    )


# -- schedule, objective, architecture ------------------------------------------------------
def test_wsd_schedule_holds_then_decays_linearly() -> None:
    optim = OptimConfig(
        lr=1.0, warmup_steps=2, schedule_steps=12, schedule="wsd", decay_fraction=0.25
    )
    got = [round(lr_at(s, optim), 6) for s in range(1, 15)]
    assert got == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.4, 0.1, 0.1, 0.1]
    with pytest.raises(ConfigError, match="schedule"):
        OptimConfig(schedule_steps=10, schedule="linear")
    with pytest.raises(ConfigError, match="decay_fraction"):
        OptimConfig(schedule_steps=10, schedule="wsd", decay_fraction=0)


def test_z_loss_is_mean_squared_log_partition_over_scored_tokens() -> None:
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [5.0, 5.0]]])  # (1, 3, 2)
    targets = torch.tensor([[0, 1, 7]])  # the last position is ignored (pad id 7)
    objective, ce, z = language_model_loss(logits, targets, ignore_index=7, z_loss_weight=0.5)
    log_z = [math.log(2.0), math.log(4.0)]
    assert z.item() == pytest.approx((log_z[0] ** 2 + log_z[1] ** 2) / 2)
    assert ce.item() == pytest.approx((math.log(2.0) + math.log(4.0)) / 2)
    assert objective.item() == pytest.approx(ce.item() + 0.5 * z.item())
    assert language_model_loss(logits, targets, ignore_index=7)[2] is None


def test_qk_norm_adds_per_head_gains_and_changes_the_function() -> None:
    base = dict(vocab_size=97, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16)
    plain, normed = ModelConfig(**base), ModelConfig(**base, qk_norm=True)
    model = Transformer(normed)
    assert sum(p.numel() for p in model.parameters()) == num_params(normed)
    assert num_params(normed) - num_params(plain) == 2 * 2 * 16  # 2 layers x (q, k) x head_dim
    assert model.layers[0].attention.q_norm.weight.shape == (16,)
    a, b = Transformer(plain), model
    init_weights(a, seed=0)
    init_weights(b, seed=0)
    tokens = torch.randint(0, 97, (2, 16))
    assert not torch.allclose(a(tokens), b(tokens))  # same weights, normalized q/k


def test_recipes_sizes_and_batches_are_computed() -> None:
    # GPT-3 "Small" shape with tied 32k embeddings; 6N + 12·L·d·T FLOPs per token at T=2048
    small = llama_125m(vocab_size=32000)
    assert num_params(small) == 32000 * 768 + 12 * (4 * 768 * 768 + 3 * 768 * 2048 + 2 * 768) + 768
    assert flops_per_token(small, 2048) == 6 * num_params(small) + 12 * 12 * 768 * 2048
    assert 1.2e9 < num_params(llama_1b(vocab_size=32000)) < 1.5e9
    assert sequences_for_tokens(1_048_576, 2048, 8) == 512
    assert sequences_for_tokens(524_288, 2047, 16) == 256
    assert sequences_for_tokens(100, 2048, 4) == 4  # at least one micro-batch


def test_llama_1b_recipe_uses_the_reference_lr_and_a_1m_token_batch(tmp_path: Path) -> None:
    packed = make_packed(tmp_path / "p", num_train=8)  # context 33: 32 tokens per sequence
    cfg = get_train_recipe("llama_1b")(packed_dir=str(packed), out_dir=str(tmp_path / "r"))
    assert cfg.optim.lr == 2e-4 and cfg.optim.betas == (0.9, 0.95) and cfg.optim.grad_clip == 1.0
    assert cfg.data.global_batch_sequences * 32 == 1_048_576


def test_mfu_uses_the_peak_table() -> None:
    assert (PEAK_FLOPS["a100"], PEAK_FLOPS["h100"], PEAK_FLOPS["h200"]) == (312e12, 989e12, 989e12)
    assert mfu(6e9, 1e4, PEAK_FLOPS["h100"], world_size=2) == pytest.approx(6e13 / 1.978e15)


# -- compute options: same names, same numbers ----------------------------------------------
def grads_after_one_backward(compute: ComputeConfig) -> dict[str, torch.Tensor]:
    model = build_model(debug_tiny(VOCAB, max_seq_len=32), ProcessInfo(), 0, compute=compute)
    tokens = torch.randint(0, VOCAB, (2, 32), generator=torch.Generator().manual_seed(0))
    language_model_loss(model(tokens[:, :-1]), tokens[:, 1:], -100)[0].backward()
    return {name: p.grad for name, p in model.named_parameters()}


def test_activation_checkpointing_keeps_names_and_gradients() -> None:
    plain = grads_after_one_backward(ComputeConfig())
    recomputed = grads_after_one_backward(ComputeConfig(activation_checkpointing=True))
    assert recomputed.keys() == plain.keys()
    assert all(torch.allclose(recomputed[k], plain[k], rtol=0, atol=1e-7) for k in plain)


def test_compile_option_compiles_every_block_and_keeps_the_function() -> None:
    compute = ComputeConfig(compile=True, compile_backend="eager")  # traces; no C++ build
    model = build_model(debug_tiny(VOCAB, max_seq_len=32), ProcessInfo(), 0, compute=compute)
    eager = build_model(debug_tiny(VOCAB, max_seq_len=32), ProcessInfo(), 0)
    assert all(block._compiled_call_impl is not None for block in model.layers)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in eager.named_parameters()]
    tokens = torch.randint(0, VOCAB, (2, 16))
    assert torch.allclose(model(tokens), eager(tokens), atol=1e-6)
    with pytest.raises(ConfigError, match="compile_backend"):
        ComputeConfig(compile_backend="tensorrt")


# -- loop: callbacks, metrics, eval hook, z-loss ---------------------------------------------
class Recorder(Callback):
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_train_start(self, trainer) -> None:
        self.calls.append(("start", trainer.step))

    def on_step_end(self, trainer, record: StepRecord) -> None:
        self.calls.append(("step", record.step, record.skipped))

    def on_train_end(self, trainer, stopped_by) -> None:
        self.calls.append(("end", trainer.step, stopped_by))


@pytest.mark.slow
def test_callbacks_metrics_console_and_val_hook(
    packed: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = make_config(packed, tmp_path, max_steps=8, every=8, skip_windows=((3, 4),))
    cfg = with_sections(
        cfg,
        optim={"z_loss_weight": 1e-3},
        metrics={"console_every_steps": 4, "val_every_steps": 4, "val_sequences": 8},
    )
    recorder = Recorder()
    from pretrain.train.loop import train
    from pretrain.train.metrics import MetricsLogger

    metrics = MetricsLogger(cfg)
    try:
        result = train(
            cfg, ProcessInfo(), events=_ListSink(), metrics=metrics, callbacks=[recorder]
        )
    finally:
        metrics.close()
    assert recorder.calls == [
        ("start", 0),
        *[("step", s, s == 3) for s in range(1, 9)],
        ("end", 8, None),
    ]
    rows = {r["step"]: r for r in read_jsonl(tmp_path / "b00" / "metrics.jsonl")}
    assert rows[3] == {"step": 3, "skipped": True, "lr": rows[3]["lr"], "tokens_seen": 2 * 8 * 32,
                       "time": rows[3]["time"]}  # fmt: skip
    for step in (4, 8):  # the eval hook's value lands in the same row as the step's loss
        assert math.isfinite(rows[step]["val_loss"]) and "loss" in rows[step]
    assert rows[8]["val_loss"] < rows[4]["val_loss"]
    row = rows[5]
    assert 0 <= row["data_wait_s"] < row["step_time_s"] and row["z_loss"] > 0
    assert row["mfu"] == pytest.approx(
        flops_per_token(cfg.model, 32) * row["tokens_per_s"] / PEAK_FLOPS["cpu"]
    )
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("step ")]
    assert [ln.split(" |")[0] for ln in lines] == ["step 4/8", "step 8/8"]
    assert f"loss {rows[8]['loss']:.4f}" in lines[1] and "tok/s" in lines[1] and "mfu" in lines[1]
    assert result.final_loss == rows[8]["loss"]


def test_console_line_for_a_skipped_step() -> None:
    line = console_line(StepRecord(step=3, lr=1e-3, tokens_seen=0, skipped=True), max_steps=9)
    assert line == "step 3/9 | skipped (skip window) | lr 1.00e-03"


class _ListSink:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def emit(self, event: dict) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


# -- checkpoints: healthy labels, async save ------------------------------------------------
@pytest.mark.slow
def test_keep_last_k_never_deletes_healthy_checkpoints(packed: Path, tmp_path: Path) -> None:
    cfg = make_config(packed, tmp_path, max_steps=12, every=2, keep_last=1)
    cfg = with_sections(cfg, checkpoint={"healthy_every_steps": 4})
    sink = _ListSink()
    run(cfg, events=sink)
    kept = [ckpt.step_of(p) for p in ckpt.list_checkpoints(tmp_path, "b00")]
    assert kept == [4, 8, 12]  # healthy 4, 8, 12; unlabelled 2, 6, 10 pruned (keep_last=1)
    events = [(e["step"], e["healthy"]) for e in sink.events if e["event"] == "checkpoint"]
    assert events == [(2, False), (4, True), (6, False), (8, True), (10, False), (12, True)]
    assert ckpt.latest_healthy_checkpoint(tmp_path, "b00", before_step=12) == tmp_path / "b00" / (
        "step-00000008"
    )
    # a label added later (by the recovery loop) protects an ordinary checkpoint too
    ckpt.prune_checkpoints(tmp_path, "b00", keep_last=1)
    assert len(ckpt.list_checkpoints(tmp_path, "b00")) == 3
    with pytest.raises(ConfigError, match="multiple of every_steps"):
        CheckpointConfig(run_root="r", every_steps=4, healthy_every_steps=6)


def test_mark_healthy_protects_from_pruning(tmp_path: Path) -> None:
    branch = tmp_path / "b00"
    for step in (2, 4, 6):
        (branch / ckpt.step_dir_name(step)).mkdir(parents=True)
        (branch / ckpt.step_dir_name(step) / "_COMMITTED").write_text("{}")
    ckpt.mark_healthy(branch / "step-00000002", reason="no spike through step 6")
    assert ckpt.prune_checkpoints(tmp_path, "b00", keep_last=1) == [branch / "step-00000004"]
    assert ckpt.is_healthy(branch / "step-00000002")
    with pytest.raises(ckpt.CheckpointError, match="not a committed"):
        ckpt.mark_healthy(branch / "step-00000004", reason="gone")


@pytest.mark.slow
def test_async_save_commits_identical_checkpoints_and_resumes_exactly(
    packed: Path, tmp_path: Path
) -> None:
    sync_cfg = make_config(packed, tmp_path / "sync", max_steps=8)
    run(sync_cfg)
    async_cfg = with_sections(
        make_config(packed, tmp_path / "async", max_steps=6), checkpoint={"async_save": True}
    )
    sink = _ListSink()
    result = run(async_cfg, events=sink)
    kinds = [e["event"] for e in sink.events if e["event"] != "progress"]
    assert kinds == ["started", "checkpoint", "checkpoint", "finished"]  # 6 commits before end
    assert result.last_checkpoint == tmp_path / "async" / "b00" / "step-00000006"
    for path in ckpt.list_checkpoints(tmp_path / "async", "b00"):
        model = ckpt.load_consolidated_model(str(path))  # staged copy == weights at save time
        assert ckpt.weights_fingerprint(model) == ckpt.read_meta(path)["weights_fingerprint"]
    run(with_sections(async_cfg, run={"max_steps": 8}))  # resume from the async step 6
    straight, resumed = losses(tmp_path / "sync"), losses(tmp_path / "async")
    assert resumed == straight


# -- init_from: a fresh run from another run's weights ---------------------------------------
def test_init_from_starts_a_fresh_run_from_the_weights_only(packed: Path, tmp_path: Path) -> None:
    """The run starts at step 1 with a fresh optimizer and the data from its start, but with
    the source's weights (its first loss is the source's last, not a random model's); its
    checkpoints record where they started; a resume of it ignores ``init_from``; a damaged
    source or another model is refused."""
    source_cfg = make_config(packed, tmp_path / "source", max_steps=12, every=12)
    run(source_cfg)
    source = tmp_path / "source" / "b00" / "step-00000012"
    scratch = make_config(packed, tmp_path / "scratch", max_steps=4, schedule_steps=8, every=4)
    run(scratch)
    started = with_sections(scratch, checkpoint={"run_root": str(tmp_path / "started")},
                            run={"init_from": str(source)})  # fmt: skip
    run(started)
    first_scratch, first_started = losses(tmp_path / "scratch")[1], losses(tmp_path / "started")[1]
    last_source = losses(tmp_path / "source")[12]
    assert first_started < first_scratch - 0.5, (first_started, first_scratch)
    assert abs(first_started - last_source) < 0.5, (first_started, last_source)
    (first,) = ckpt.list_checkpoints(tmp_path / "started", "b00")
    assert ckpt.step_of(first) == 4  # counted from 1, not from the source's step 12
    meta = ckpt.read_meta(first)
    assert meta["lineage"]["initialized_from"] == str(source)
    assert (
        meta["data_state"]
        == ckpt.read_meta(ckpt.list_checkpoints(tmp_path / "scratch", "b00")[0])["data_state"]
    )  # the data from its start, as a scratch run reads it
    # resuming the started run continues its own step 4 (init_from is not loaded again)
    run(with_sections(started, run={"max_steps": 8}))
    resumed = ckpt.read_meta(ckpt.list_checkpoints(tmp_path / "started", "b00")[-1])
    assert resumed["step"] == 8 and resumed["lineage"]["initialized_from"] == str(source)
    # refusals: another model, a damaged checkpoint
    bigger = dataclasses.replace(started.model, d_model=started.model.d_model * 2)
    with pytest.raises(ckpt.CheckpointError, match="same model"):
        run(started.replace(model=bigger, checkpoint=dataclasses.replace(
            started.checkpoint, run_root=str(tmp_path / "other"))))  # fmt: skip
    victim = next(p for p in source.iterdir() if p.suffix == ".distcp")
    victim.write_bytes(victim.read_bytes()[:-8])
    with pytest.raises(ckpt.CheckpointError, match="damaged"):
        run(with_sections(started, checkpoint={"run_root": str(tmp_path / "third")}))
