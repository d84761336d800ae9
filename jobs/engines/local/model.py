"""The local engine's model: a tiny seeded Llama whose every greedy choice is sharp, its
self-speculative drafts, and prompts that repeat phrases (so prompt lookup has something to find).

The weights are random but planted: each token's final hidden state is read by an lm_head row
built from it (a seeded map from token to next token), and attention only perturbs. Top-1
margins are then far above float32 noise. No download, no tokenizer: token ids in and out.
"""

from __future__ import annotations

import argparse
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import LlamaForCausalLM

ATTENTION_SCALE = 0.05
LOGIT_SCALE = 10.0
PHRASE_LEN = 8
PHRASES_PER_PROMPT = 6


def build_target(args: argparse.Namespace) -> LlamaForCausalLM:
    """The seeded target model with planted, sharp next-token choices."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(args.seed)
    config = _llama_config(args, layers=args.num_layers, vocab=args.vocab_size)
    model = LlamaForCausalLM(config)
    model.eval()  # type: ignore[no-untyped-call]
    model.requires_grad_(False)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(ATTENTION_SCALE)
        written = _layer_writes(model, args.vocab_size)
        written = written - written.mean(dim=0, keepdim=True)
        written = written / written.norm(dim=1, keepdim=True)
        rng = torch.Generator().manual_seed(args.seed + 1)
        next_token = torch.randint(0, args.vocab_size, (args.vocab_size,), generator=rng)
        head = torch.zeros_like(model.lm_head.weight)
        head.index_add_(0, next_token, written)
        model.lm_head.weight.copy_(head * LOGIT_SCALE)
    _set_greedy(model)
    return model


def build_draft(target: LlamaForCausalLM, args: argparse.Namespace) -> LlamaForCausalLM | None:
    """A self-speculative draft (the target's first layers, norm and head), or one of its own
    vocabulary when `--draft-vocab-size` is set; None without `--draft-layers`."""
    if args.draft_layers is None:
        return None
    import torch
    from transformers import LlamaForCausalLM

    vocab = args.draft_vocab_size or args.vocab_size
    draft = LlamaForCausalLM(_llama_config(args, layers=args.draft_layers, vocab=vocab))
    draft.eval()  # type: ignore[no-untyped-call]
    draft.requires_grad_(False)
    if args.draft_vocab_size is None:
        draft.model.embed_tokens = target.model.embed_tokens
        draft.model.layers = torch.nn.ModuleList(target.model.layers[: args.draft_layers])
        draft.model.norm = target.model.norm
        draft.lm_head = target.lm_head
    _set_greedy(draft)
    draft.generation_config.num_assistant_tokens = args.num_assistant_tokens
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    return draft


def make_prompts(args: argparse.Namespace, target: LlamaForCausalLM) -> list[list[int]]:
    """Seeded prompts that repeat a few phrases of the model's own grammar, the way code edits
    and summaries repeat their input."""
    import torch

    with torch.no_grad():
        alone = target(input_ids=torch.arange(args.vocab_size).unsqueeze(1)).logits[:, 0]
    follows = [int(t) for t in alone.argmax(dim=-1)]  # the greedy pick after each token alone
    rng = random.Random(args.seed * 7919 + 1)
    prompts = []
    for _ in range(args.num_prompts):
        phrases = []
        for _ in range(PHRASES_PER_PROMPT):
            phrase = [rng.randrange(args.vocab_size)]
            while len(phrase) < PHRASE_LEN:
                phrase.append(follows[phrase[-1]])
            phrases.append(phrase)
        prompt: list[int] = []
        while len(prompt) < args.input_len:
            prompt += rng.choice(phrases)
        prompts.append(prompt[: args.input_len])
    return prompts


def _llama_config(args: argparse.Namespace, *, layers: int, vocab: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=args.num_heads,
        num_key_value_heads=args.num_heads,
        vocab_size=vocab,
        max_position_embeddings=max(1024, args.input_len + args.output_len + 64),
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
    )


def _layer_writes(model: LlamaForCausalLM, vocab: int) -> torch.Tensor:
    """What all layers together add to each token's embedding, each token alone."""
    import torch

    captured: list[torch.Tensor] = []

    def keep(_module: Any, _inputs: Any, output: Any) -> None:
        captured.append(output[0] if isinstance(output, tuple) else output)

    hook = model.model.layers[-1].register_forward_hook(keep)
    try:
        model.model(input_ids=torch.arange(vocab).unsqueeze(1))
    finally:
        hook.remove()
    written: torch.Tensor = captured[0][:, 0] - model.model.embed_tokens.weight
    return written


def _set_greedy(model: LlamaForCausalLM) -> None:
    config = model.generation_config
    config.do_sample = False
    config.eos_token_id = None
    config.pad_token_id = 0
    config.bos_token_id = None
    for name in ("temperature", "top_p", "top_k"):
        setattr(config, name, None)
