"""Sampled generations for a fixed prompt set with a fixed seed: the eyeball check of a report.

    from pretrain.eval.generate import GenerationConfig, generate
    samples = generate(model, tok, GenerationConfig(max_new_tokens=32), eos_id=1, device="cpu")
    samples[0]  # {"prompt": "def fibonacci(n):", "completion": "...", "num_tokens": 32}

Sampling uses one ``torch.Generator`` on the CPU seeded from the config, and draws each token
on the CPU from the (temperature-scaled, top-k-filtered) distribution, so a rerun gives the same
text on CPU and, up to floating-point differences in the logits, on GPU. Each prompt starts
after the end-of-document token, as documents do in the packed data. No KV cache: the whole
context is re-run per token, which is fine for a few dozen tokens of a report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pretrain.errors import ConfigError
from pretrain.settings import check_types

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_PROMPTS = (
    "def fibonacci(n):\n",
    "import os\nimport sys\n\n",
    "The meaning of life is",
    "Once upon a time, there was",
    "Copyright (c) ",
)


@dataclass(frozen=True, kw_only=True)
class GenerationConfig:
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    max_new_tokens: int = 32
    temperature: float = 0.8
    top_k: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        check_types(self)
        if self.max_new_tokens <= 0 or self.top_k <= 0:
            raise ConfigError("GenerationConfig.max_new_tokens and top_k must be >= 1")
        if self.temperature < 0:
            raise ConfigError("GenerationConfig.temperature must be >= 0 (0 means greedy)")
        if not all(isinstance(p, str) and p for p in self.prompts):
            raise ConfigError("GenerationConfig.prompts must be non-empty strings")


def generate(
    model: Any, tok: Tokenizer, config: GenerationConfig, *, eos_id: int, device: Any
) -> list[dict[str, Any]]:
    """One sampled completion per prompt; stops at ``max_new_tokens`` or the EOS token."""
    import torch

    generator = torch.Generator().manual_seed(config.seed)
    limit = model.cfg.max_seq_len
    out = []
    with torch.no_grad():
        for prompt in config.prompts:
            ids = [eos_id, *tok.encode(prompt, add_special_tokens=False).ids]
            new: list[int] = []
            for _ in range(config.max_new_tokens):
                context = torch.tensor([(ids + new)[-limit:]], device=device)
                logits = model(context)[0, -1].float().cpu()
                if config.temperature == 0:
                    token = int(logits.argmax())
                else:
                    top = logits.topk(min(config.top_k, logits.numel()))
                    probs = (top.values / config.temperature).softmax(-1)
                    token = int(top.indices[torch.multinomial(probs, 1, generator=generator)])
                if token == eos_id:
                    break
                new.append(token)
            out.append(
                {
                    "prompt": prompt,
                    "completion": tok.decode(new, skip_special_tokens=False),
                    "num_tokens": len(new),
                }
            )
    return out
