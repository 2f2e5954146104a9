"""Zero-shot scoring, bits per byte, skipped tasks, generations, and honest chance-level scores.

Builds what it needs in-process: a byte-level BPE tokenizer trained on inline text, a packed
validation split made with it, and checkpoints of small random models. The chance-level test
reads the real task files from ``../shared/data/eval`` and skips when they are absent.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from pretrain.distributed import ProcessInfo
from pretrain.eval import EvalConfig, GenerationConfig, TaskSpec, default_tasks, evaluate_checkpoint
from pretrain.eval.scoring import encode_request, score_requests, score_task
from pretrain.eval.tasks import MultipleChoice, load_task
from pretrain.eval.tokens import token_byte_lengths
from pretrain.train.parallel import build_model
from tests.helpers.eval_models import (
    SEQ_LEN,
    TEXT,
    random_model_and_val,
    tiny_model_config,
    train_tiny_tokenizer,
)
from tests.helpers.shared_data import SHARED_EVAL


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Tokenizer, str]:
    folder, tok = train_tiny_tokenizer(tmp_path_factory.mktemp("tok"))
    sha = hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()
    return folder, tok, sha


def test_token_bytes_sum_to_utf8_bytes(tokenizer: tuple[Path, Tokenizer, str]) -> None:
    _, tok, _ = tokenizer
    text = TEXT + " naïve café — 中文 🚀"
    lengths = token_byte_lengths(tok)
    assert lengths[:3].tolist() == [0, 0, 0]  # BOS, EOS, PAD cover no text
    assert int(lengths[tok.encode(text).ids].sum()) == len(text.encode("utf-8"))


def test_encode_request_splits_like_the_harness(tokenizer: tuple[Path, Tokenizer, str]) -> None:
    _, tok, _ = tokenizer
    req = encode_request(tok, "Question: who?\nAnswer: ", "the fox", prefix_id=1)
    context_ids = tok.encode("Question: who?\nAnswer:").ids
    assert req.context == (1, *context_ids)  # trailing space moved to the continuation
    assert (
        list(req.continuation)
        == tok.encode("Question: who?\nAnswer: the fox").ids[len(context_ids) :]
    )
    assert tok.decode(list(req.continuation)) == " the fox"


def test_batched_scores_equal_full_logits(tokenizer: tuple[Path, Tokenizer, str]) -> None:
    _, tok, _ = tokenizer
    model = build_model(tiny_model_config(tok.get_vocab_size()), ProcessInfo(), seed=3).eval()
    words = TEXT.split()
    requests = [
        encode_request(tok, " ".join(words[: 2 + i]), " " + words[2 + i], prefix_id=1)
        for i in range(0, 30, 3)
    ] + [encode_request(tok, " ".join(words[:60]), " fox", prefix_id=1)]  # context cut on the left
    assert len(requests[-1].context) > SEQ_LEN
    batched = score_requests(model, requests, batch_size=4, device="cpu", pad_id=2)
    for req, (logprob, greedy) in zip(requests, batched, strict=True):
        seq = torch.tensor([(req.context + req.continuation)[-(SEQ_LEN + 1) :]])
        with torch.no_grad():
            logprobs = model(seq[:, :-1]).log_softmax(-1)[0]
        n = len(req.continuation)
        target = seq[0, -n:]
        expected = logprobs[-n:].gather(1, target[:, None]).sum()
        assert logprob == pytest.approx(float(expected), abs=1e-4)
        assert greedy == bool((logprobs[-n:].argmax(-1) == target).all())
    long = encode_request(tok, "", " ".join(words[:60]), prefix_id=1)  # > max_seq_len tokens
    [(long_lp, _)] = score_requests(model, [long], batch_size=1, device="cpu")
    tail = torch.tensor([long.continuation[-(SEQ_LEN + 1) :]])  # the part that fits is scored
    with torch.no_grad():
        tail_lp = model(tail[:, :-1]).log_softmax(-1)[0].gather(1, tail[0, 1:, None]).sum()
    assert long_lp == pytest.approx(float(tail_lp), abs=1e-4)
    one_by_one = score_requests(model, requests, batch_size=1, device="cpu", pad_id=2)
    assert [lp for lp, _ in one_by_one] == pytest.approx([lp for lp, _ in batched], abs=1e-4)


def test_ties_score_fractionally_and_order_does_not_matter(
    tokenizer: tuple[Path, Tokenizer, str],
) -> None:
    _, tok, _ = tokenizer
    model = build_model(tiny_model_config(tok.get_vocab_size()), ProcessInfo(), seed=0).eval()
    tied = [MultipleChoice(context="", choices=("the dog", "the dog"), gold=0)] * 3
    result = score_task(model, tok, tied, name="ties", prefix_id=1)
    assert result.acc == 0.5 and result.acc_norm == 0.5  # argmax would claim 1.0
    choices = (" fox.", " dog jumps over.", " student", " pole and grabs")
    forward = [MultipleChoice(context="The quick brown", choices=choices, gold=g) for g in range(4)]
    reverse = [MultipleChoice(context="The quick brown", choices=choices[::-1], gold=3 - g)
               for g in range(4)]  # fmt: skip
    a, b = (score_task(model, tok, ex, name="x", prefix_id=1) for ex in (forward, reverse))
    assert a.acc == b.acc == 0.25 and a.acc_norm == b.acc_norm == 0.25  # one gold per choice


def test_report_has_bits_per_byte_tasks_and_generations(
    tokenizer: tuple[Path, Tokenizer, str], tmp_path: Path
) -> None:
    folder, tok, sha = tokenizer
    packed, ckpt = random_model_and_val(tmp_path, tok, sha)
    blimp = tmp_path / "blimp.jsonl"
    pairs = [("The dog runs.", "The dog run."), ("Who should Derek hug?", "Who Derek should hug?")]
    blimp.write_text("".join(json.dumps({"sentence_good": g, "sentence_bad": b}) + "\n"
                             for g, b in pairs))  # fmt: skip
    missing = tmp_path / "absent" / "hellaswag.jsonl.gz"
    config = EvalConfig(
        tasks=(
            TaskSpec(kind="blimp", path=str(blimp)),
            TaskSpec(kind="hellaswag", path=str(missing)),
        ),
        generation=GenerationConfig(prompts=("def f", "The"), max_new_tokens=5, seed=1),
    )
    stats = evaluate_checkpoint(str(ckpt), str(packed), str(tmp_path / "out"), config,
                                tokenizer_uri=str(folder))  # fmt: skip

    (prose,) = stats.per_source
    rows = np.fromfile(packed / "val-prose-00000.bin", dtype="<u2").reshape(-1, SEQ_LEN)
    text_bytes = sum(len(tok.decode(row[1:].tolist()).encode()) for row in rows)
    assert prose.num_bytes == stats.overall.num_bytes == text_bytes
    assert prose.bits_per_byte == pytest.approx(
        prose.loss * prose.num_tokens / math.log(2) / text_bytes
    )
    assert stats.tasks["blimp"]["status"] == "ok" and stats.tasks["blimp"]["num_examples"] == 2
    assert stats.tasks["hellaswag"] == {
        "status": "skipped",
        "reason": f"{missing} not found (run `pretrain evals fetch`)",
    }
    meta = stats.as_metadata()
    assert meta["tasks_skipped"] == ["hellaswag"] and "acc/blimp" in meta
    assert meta["tokens_seen"] == 123
    assert [g["prompt"] for g in stats.generations] == ["def f", "The"]
    assert all(0 < g["num_tokens"] <= 5 for g in stats.generations)
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert f"| hellaswag | skipped: {missing} not found (run `pretrain evals fetch`) |" in report_md
    assert "| prose |" in report_md and "## Generations" in report_md
    assert stats.empty_sources == ("license",) and meta["val_sources_empty"] == ["license"]
    assert "| license | 0 | not scored: no packed val sequence |" in report_md

    again = evaluate_checkpoint(str(ckpt), str(packed), str(tmp_path / "again"), config,
                                tokenizer_uri=str(folder))  # fmt: skip
    assert again.generations == stats.generations  # fixed sampling seed
    assert again.tasks == stats.tasks


def test_without_tokenizer_tasks_are_reported_skipped(
    tokenizer: tuple[Path, Tokenizer, str], tmp_path: Path
) -> None:
    _, tok, sha = tokenizer
    packed, ckpt = random_model_and_val(tmp_path, tok, sha)
    config = EvalConfig(tasks=default_tasks(str(tmp_path)), generation=None)
    stats = evaluate_checkpoint(str(ckpt), str(packed), str(tmp_path / "out"), config)
    assert stats.overall.bits_per_byte is None
    assert {t["status"] for t in stats.tasks.values()} == {"skipped"}
    assert sorted(stats.tasks) == ["arc_easy", "blimp", "hellaswag"]


@pytest.mark.slow  # scores 200 examples of three real tasks
@pytest.mark.skipif(not SHARED_EVAL.is_dir(), reason="../shared/data/eval is absent")
def test_random_model_scores_at_chance(tokenizer: tuple[Path, Tokenizer, str]) -> None:
    """No label leakage: an untrained model is within 3 binomial σ of chance (accuracy), and
    never above chance + 3σ (length-normalized accuracy, which a random model's preference for
    bytes-dense choices can push below chance: ARC-Easy ≈ 0.20)."""
    _, tok, _ = tokenizer
    cfg = tiny_model_config(tok.get_vocab_size(), max_seq_len=512)
    model = build_model(cfg, ProcessInfo(), seed=11).eval()
    sizes = {"hellaswag": 200, "arc_easy": 300, "blimp": 1000}  # ±3σ: 0.09, 0.075, 0.047
    for spec in default_tasks(str(SHARED_EVAL)):
        examples = load_task(
            TaskSpec(kind=spec.kind, path=spec.path, max_examples=sizes[spec.kind])
        )
        assert examples is not None and len(examples) == sizes[spec.kind]
        r = score_task(model, tok, examples, name=spec.kind, prefix_id=1, batch_size=64)
        sigma = math.sqrt(r.chance * (1 - r.chance) / r.num_examples)
        assert abs(r.acc - r.chance) < 3 * sigma, (spec.kind, r)
        assert r.acc_norm < r.chance + 3 * sigma, (spec.kind, r)


def test_z_vs_chance_uses_the_guessing_models_standard_error() -> None:
    from pretrain.eval.scoring import TaskResult

    def result(acc: float, chance: float, n: int) -> TaskResult:
        return TaskResult(name="t", num_examples=n, acc=acc, acc_norm=acc, acc_stderr=0.0,
                          chance=chance, num_tokens=0, num_truncated=0)  # fmt: skip

    assert result(0.542, 0.5, 2000).z_vs_chance == pytest.approx(3.756, abs=1e-3)
    assert result(0.25, 0.25, 400).z_vs_chance == 0.0
    assert result(0.20, 0.25, 570).z_vs_chance < -2.7  # below chance is negative, not hidden
    assert result(0.5, 0.5, 10).to_dict()["z_vs_chance"] == 0.0
