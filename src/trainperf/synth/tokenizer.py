"""A word-level tokenizer made locally: it stands in for the real one, so nothing reaches the hub.

Token ``w<i>`` has id ``i``; ids 0..3 are ``<pad> <bos> <eos> <unk>``. The vocabulary has
exactly the model's size, so synthetic ids and decoded text round-trip.
"""

from __future__ import annotations

from typing import Any

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
FIRST_REGULAR_ID = len(SPECIAL_TOKENS)

# A minimal chat template (RL workloads format prompts with it).
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} <eos> {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def build_tokenizer(vocab_size: int) -> Any:
    """A ``PreTrainedTokenizerFast`` with ``vocab_size`` entries and no files on disk."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({f"w{i}": i for i in range(FIRST_REGULAR_ID, vocab_size)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
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
