"""Batched log-likelihood scoring of continuations, and multiple-choice accuracy from it.

    from pretrain.eval.scoring import encode_request, score_requests, score_task
    request = encode_request(tok, "Question: 2+2?\\nAnswer:", " 4", prefix_id=eos_id)
    [(logprob, is_greedy)] = score_requests(model, [request], batch_size=32, device="cpu")
    result = score_task(model, tok, examples, name="arc_easy", prefix_id=eos_id)
    result.acc, result.acc_norm

Batching: requests are sorted longest first (as lm-evaluation-harness does), so each batch pads
little; rows are right-padded and run through the causal model without a mask, which is exact:
a causal position never attends to the padding after it. Only the continuation positions go
through the output head and ``log_softmax`` (:func:`hidden_states` runs the model without its
head): for HellaSwag that is ~20 of ~100 positions, and the head is most of a small model's
FLOPs, so memory and compute stay at ``continuation × vocab`` instead of ``sequence × vocab``. The same code runs
on CPU and CUDA; ``score_requests(batch_size=1)`` is the one-at-a-time baseline.

Every request starts with ``prefix_id`` (the end-of-document token: in packed training data
every document follows one), then the context, then the continuation, left-truncated to the
model's ``max_seq_len`` (the harness does the same); a continuation longer than the context
window keeps its last tokens. :class:`TaskResult` counts the requests that lost tokens either way.

Accuracy counts ties honestly: if ``k`` choices share the best score and the gold one is among
them, the example scores ``1/k`` (``argmax`` would always pick choice 0, which is BLiMP's gold).
``acc_norm`` compares log-likelihood per UTF-8 byte of the choice (the harness uses characters;
the two agree on ASCII text).

Two continuous scores stand beside the accuracies, because at small scale they rank models long
before accuracy leaves chance (DataDecide, 2025): ``correct_logprob_per_byte``, the mean
log-likelihood of the gold continuation per UTF-8 byte, and ``correct_prob``, the mean
probability of the gold choice normalised over the choices (a softmax of the per-byte
log-likelihoods). Higher is better for both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from pretrain.eval.tasks import MultipleChoice


@dataclass(frozen=True, kw_only=True)
class Request:
    """Token ids of one log-likelihood request: score ``continuation`` after ``context``."""

    context: tuple[int, ...]
    continuation: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    name: str
    num_examples: int
    acc: float
    acc_norm: float
    acc_stderr: float
    chance: float
    num_tokens: int
    num_truncated: int  # requests cut on the left to fit max_seq_len
    correct_logprob_per_byte: float = math.nan  # mean log P(gold) / its UTF-8 bytes
    correct_prob: float = math.nan  # mean softmax over choices of per-byte log P, at the gold

    @property
    def z_vs_chance(self) -> float:
        """How many null-hypothesis standard errors ``acc`` lies above chance (a model that
        guesses has ``acc`` ~ Binomial(n, chance)/n); > 2 beats chance at p < 0.025."""
        null_se = math.sqrt(self.chance * (1 - self.chance) / self.num_examples)
        return (self.acc - self.chance) / null_se if null_se > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": "ok", **self.__dict__, "z_vs_chance": self.z_vs_chance}


def encode_request(tok: Tokenizer, context: str, continuation: str, *, prefix_id: int) -> Request:
    """lm-evaluation-harness tokenization: encode ``context + continuation`` whole and split it
    after the context's tokens (so a merge across the boundary is kept); trailing spaces of the
    context move to the continuation first."""
    spaces = len(context) - len(context.rstrip(" "))
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tok.encode(context + continuation, add_special_tokens=False).ids
    n_context = len(tok.encode(context, add_special_tokens=False).ids) if context else 0
    cont = tuple(whole[n_context:])
    if not cont:
        raise ValueError(f"continuation {continuation!r} encodes to no tokens")
    return Request(context=(prefix_id, *whole[:n_context]), continuation=cont)


def hidden_states(model: Any, tokens: Any) -> Any:
    """:class:`pretrain.model.Transformer`'s forward up to the final norm, without the head.

    Mirrors ``Transformer.forward``; ``tests/unit/eval/test_eval_tasks.py`` checks that scores computed
    through it equal those from the full logits."""
    seq = tokens.shape[1]
    if seq > model.cfg.max_seq_len:
        raise ValueError(f"sequence length {seq} exceeds max_seq_len={model.cfg.max_seq_len}")
    cos, sin = model.rope_cos[:seq], model.rope_sin[:seq]
    x = model.tok_embeddings(tokens)
    for layer in model.layers:
        x = layer(x, cos, sin)
    return model.norm(x)


def score_requests(
    model: Any, requests: Sequence[Request], *, batch_size: int, device: Any, pad_id: int = 0
) -> list[tuple[float, bool]]:
    """(summed log-probability, continuation is the greedy decode) per request, in input order."""
    import torch

    max_len = model.cfg.max_seq_len + 1  # tokens per row (inputs are one shorter)
    seqs = [(r.context + r.continuation)[-max_len:] for r in requests]
    # a continuation longer than the model's context keeps its last tokens (counted as truncated)
    conts = [min(len(r.continuation), len(seq) - 1) for r, seq in zip(requests, seqs, strict=True)]
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    results: list[tuple[float, bool]] = [(0.0, False)] * len(seqs)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = len(seqs[batch[0]]) - 1
            inputs = torch.full((len(batch), width), pad_id, dtype=torch.long)
            rows: list[int] = []
            cols: list[int] = []
            targets: list[int] = []
            owner: list[int] = []
            for row, i in enumerate(batch):
                seq = seqs[i]
                inputs[row, : len(seq) - 1] = torch.tensor(seq[:-1])
                first = len(seq) - 1 - conts[i]  # input position predicting the first cont token
                rows += [row] * conts[i]
                cols += range(first, len(seq) - 1)
                targets += seq[-conts[i] :]
                owner += [row] * conts[i]
            hidden = hidden_states(model, inputs.to(device))
            picked = hidden[torch.tensor(rows, device=device), torch.tensor(cols, device=device)]
            logprobs = model.output(picked).float().log_softmax(-1)
            target_t = torch.tensor(targets, device=device)
            token_lp = logprobs.gather(1, target_t[:, None])[:, 0]
            hit = logprobs.argmax(-1) == target_t
            owner_t = torch.tensor(owner, device=device)
            sums = torch.zeros(len(batch), device=device, dtype=torch.float64)
            sums.index_add_(0, owner_t, token_lp.double())
            misses = torch.zeros(len(batch), device=device, dtype=torch.long)
            misses.index_add_(0, owner_t, (~hit).long())
            for row, i in enumerate(batch):
                results[i] = (float(sums[row]), int(misses[row]) == 0)
    return results


def _tie_aware_hit(scores: Sequence[float], gold: int) -> float:
    best = max(scores)
    winners = [i for i, s in enumerate(scores) if s == best]
    return 1.0 / len(winners) if gold in winners else 0.0


def score_task(
    model: Any,
    tok: Tokenizer,
    examples: Sequence[MultipleChoice],
    *,
    name: str,
    prefix_id: int,
    batch_size: int = 32,
    device: Any = "cpu",
    pad_id: int = 0,
) -> TaskResult:
    """Accuracy and length-normalized accuracy of ``model`` on ``examples``."""
    requests: list[Request] = []
    spans: list[tuple[int, int]] = []
    for ex in examples:
        spans.append((len(requests), len(ex.choices)))
        requests += [encode_request(tok, ex.context, c, prefix_id=prefix_id) for c in ex.choices]
    scored = score_requests(model, requests, batch_size=batch_size, device=device, pad_id=pad_id)
    acc = acc_norm = gold_per_byte = gold_prob = 0.0
    for ex, (first, count) in zip(examples, spans, strict=True):
        logprobs = [lp for lp, _ in scored[first : first + count]]
        per_byte = [
            lp / max(1, len(c.encode("utf-8"))) for lp, c in zip(logprobs, ex.choices, strict=True)
        ]
        acc += _tie_aware_hit(logprobs, ex.gold)
        acc_norm += _tie_aware_hit(per_byte, ex.gold)
        gold_per_byte += per_byte[ex.gold]
        top = max(per_byte)
        gold_prob += math.exp(per_byte[ex.gold] - top) / sum(math.exp(v - top) for v in per_byte)
    n = len(examples)
    mean = acc / n
    return TaskResult(
        name=name,
        num_examples=n,
        acc=mean,
        acc_norm=acc_norm / n,
        acc_stderr=math.sqrt(mean * (1 - mean) / max(1, n - 1)),
        correct_logprob_per_byte=gold_per_byte / n,
        correct_prob=gold_prob / n,
        chance=sum(1 / len(ex.choices) for ex in examples) / n,
        num_tokens=sum(len(r.context) + len(r.continuation) for r in requests),
        num_truncated=sum(
            len(r.context) + len(r.continuation) > model.cfg.max_seq_len + 1 for r in requests
        ),
    )
