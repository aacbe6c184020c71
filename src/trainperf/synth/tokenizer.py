"""A word-level tokenizer made locally: it stands in for the real one, so nothing reaches the hub.

Token ``w<i>`` has id ``i``; ids 0..3 are ``<pad> <bos> <eos> <unk>``; the last three ids are
ChatML's ``<|im_start|> <|im_end|>`` and a newline, because RL frameworks treat a Qwen model's
tokenizer as ChatML (verl 0.9's ``QwenContinuousTokenBuilder`` refuses a tokenizer whose ``"\n"``
is not exactly one token). The vocabulary has exactly the model's size, so synthetic ids and
decoded text round-trip.
"""

from __future__ import annotations

from typing import Any

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
FIRST_REGULAR_ID = len(SPECIAL_TOKENS)
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>", "\n")  # the vocabulary's last ids, in this order
CHAT_ROLES = ("system", "user", "assistant")  # regular words too, so a rendered chat has no <unk>

# Qwen's ChatML layout (RL workloads format prompts with it).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def regular_id_end(vocab_size: int) -> int:
    """One past the last ``w<i>`` id: synthetic data draws from ``FIRST_REGULAR_ID`` up to this."""
    return vocab_size - len(CHATML_TOKENS) - len(CHAT_ROLES)


def build_tokenizer(vocab_size: int) -> Any:
    """A ``PreTrainedTokenizerFast`` with ``vocab_size`` entries and no files on disk."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    end = regular_id_end(vocab_size)
    if end <= FIRST_REGULAR_ID:
        raise ValueError(f"a vocabulary of {vocab_size} leaves no room for regular tokens")
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"w{i}": i for i in range(FIRST_REGULAR_ID, end)})
    vocab.update({token: end + i for i, token in enumerate((*CHAT_ROLES, *CHATML_TOKENS))})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # Added tokens are matched before the whitespace split, so the newline survives as a token;
    # they are already in the vocabulary, so the size does not change.
    core.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in CHATML_TOKENS[:2]])
    core.add_tokens([AddedToken("\n", normalized=False, special=False)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        model_max_length=1 << 20,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer
