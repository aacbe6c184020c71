"""The local stand-in tokenizer: exact vocabulary size, ChatML layout for RL frameworks."""

from __future__ import annotations

import pytest

from trainperf.synth.tokenizer import CHATML_TOKENS, FIRST_REGULAR_ID, build_tokenizer, regular_id_end


def chat_ids(tokenizer, messages: list[dict[str, str]]) -> list[int]:  # type: ignore[no-untyped-def]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_the_vocabulary_has_exactly_the_models_size_and_words_round_trip() -> None:
    tokenizer = build_tokenizer(1000)
    assert len(tokenizer) == 1000
    words = [f"w{i}" for i in (FIRST_REGULAR_ID, 500, regular_id_end(1000) - 1)]
    ids = tokenizer.encode(" ".join(words), add_special_tokens=False)
    assert ids == [FIRST_REGULAR_ID, 500, regular_id_end(1000) - 1]
    assert tokenizer.decode(ids).split() == words


def test_a_newline_is_one_token_as_verls_qwen_chatml_builder_requires() -> None:
    """verl 0.9.1 verl/utils/tokenizer/continuous_token.py, QwenContinuousTokenBuilder.__init__:
    ``newline_ids = tokenizer.encode("\\n", add_special_tokens=False)`` must have length 1 and
    ``<|im_end|>`` must be a token. The word-level split used to drop the newline (a GPU run
    failed there: "Expected Qwen newline to tokenize to one token, got []")."""
    tokenizer = build_tokenizer(151_936)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    assert len(newline) == 1
    im_start, im_end = (tokenizer.convert_tokens_to_ids(t) for t in CHATML_TOKENS[:2])
    assert {im_start, im_end, newline[0]} == {151_933, 151_934, 151_935}
    assert tokenizer.encode("w7\n<|im_end|>\nw8", add_special_tokens=False) == [
        7,
        newline[0],
        im_end,
        newline[0],
        8,
    ]


def test_the_chat_template_is_chatml_and_has_no_unknown_tokens() -> None:
    tokenizer = build_tokenizer(1000)
    ids = chat_ids(tokenizer, [{"role": "user", "content": "w5 w6"}])
    assert tokenizer.convert_ids_to_tokens(ids) == [
        "<|im_start|>",
        "user",
        "\n",
        "w5",
        "w6",
        "<|im_end|>",
        "\n",
        "<|im_start|>",
        "assistant",
        "\n",
    ]
    assert tokenizer.unk_token_id not in ids


def test_a_vocabulary_too_small_for_the_reserved_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match="no room"):
        build_tokenizer(10)
