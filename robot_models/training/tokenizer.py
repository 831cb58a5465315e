"""Byte-level BPE tokenizer of the planner, trained with `tokenizers`.

Digits are split into single-digit tokens before BPE, so they never merge with
letters and numbers in plans (distances, angles, coordinates) are copied digit by
digit from the instruction. With `number_tokens`, every whole number from 0 to 999 is
one token instead (longer digit runs are cut into chunks of up to three digits,
leftmost first), so a number is copied as one token: digit-by-digit copying is where
the small planner slips (`ml(599)` for 59 cm).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from robot_models.training.hf_format import EOS_TOKEN, PAD_TOKEN

VOCAB_SIZE = 1536  # BPE tokens; the number tokens come on top
NUMBER_TOKENS = 1000  # "0" .. "999"


def train_tokenizer(
    corpus: Iterable[str], vocab_size: int = VOCAB_SIZE, number_tokens: bool = False
) -> Tokenizer:
    """BPE over bytes, then (if `number_tokens`) one token per number 0..999;
    `<eos>` is id 0 and `<pad>` id 1."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    if number_tokens:
        # Added tokens are matched on the raw text before pre-tokenization, longest
        # first, so "1234" is "123" + "4" and "05" stays "0" + "5". Single digits are
        # already in the BPE vocabulary and keep their ids.
        tokenizer.add_tokens([AddedToken(str(n), normalized=False) for n in range(NUMBER_TOKENS)])
    return tokenizer


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path) -> None:
    """tokenizer.json plus the small files `transformers.AutoTokenizer` reads."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 2048,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special = {"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def special_id(tokenizer: Tokenizer, token: str) -> int:
    """Id of a special token, which every planner tokenizer must have."""
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ValueError(f"tokenizer has no {token!r} token")
    return token_id
