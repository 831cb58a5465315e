"""Byte-level BPE tokenizer of the planner, trained with `tokenizers`.

How numbers are tokenized decides how reliably the small planner copies them from
the instruction into the plan (distances, angles, coordinates). Three formats:

- `place` (the default): every digit is its own token, marked with its place:
  "436" is `H4 T3 6` (hundreds, tens, units), "50" is `T5 0`. The first token of a
  copied number says how many digits follow, and the tens 5 of "59" is another token
  than the hundreds 5 of "599", so a digit-count slip of plain digits (`mr(747)` for
  "74 cm") no longer looks like a faithful copy. There are 29 digit tokens (hundreds
  1-9, tens 0-9, units 0-9), all frequent. The marks are two control characters
  inserted by the normalizer and removed by the decoder, so `decode(encode(text)) ==
  text` and any loader of `tokenizer.json` (transformers, vLLM) reads them the same.
- `digits`: plain single-digit tokens (the checkpoints before the place format).
- `whole`: one token per whole number 0..999 (longer runs in chunks of up to three
  digits, leftmost first); rarely seen numbers then get poorly learned tokens.

In every format digits never merge with letters in BPE.

How words meet spaces is a second choice, made for copying object names:

- `attached` (the default): GPT-2's pre-tokenization, a space joins the word after
  it (`Ġred Ġcup`). A quoted plan string starts without one (`('` then `red Ġcup`),
  so a name copied from the instruction into a plan is another token sequence, and
  an unseen word can split differently in the two places.
- `spaced`: every single space is a pre-token of its own and words never hold one,
  so "find the red cup" is `find ␣ the ␣ red ␣ cup` and `('red cup')` is `(' red ␣
  cup ')`: a word is the same ids wherever it stands. Other whitespace (newlines,
  tabs) stays in runs as before, a contraction (`'s`, `'t`, ...) is one pre-token
  only right after a letter (so the quote opening `'sofa'` is not read as `'s`),
  and numbers are as in the number format. Nothing is inserted or removed: the
  decoder is the same as in `attached`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable
from pathlib import Path

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

from robot_models.training.hf_format import EOS_TOKEN, PAD_TOKEN

VOCAB_SIZE = 1536  # BPE tokens; the `whole` format's number tokens come on top
NUMBER_TOKENS = 1000  # `whole`: "0" .. "999"
NUMBER_FORMATS = ("place", "digits", "whole")
WORD_FORMATS = ("attached", "spaced")
MIN_VOCAB_SIZE = 258  # the 256 byte tokens and the two special ones
HUNDREDS_MARK = "\x1d"  # before the hundreds digit of a number (ASCII group separator)
TENS_MARK = "\x1c"  # before the tens digit (ASCII file separator)
# Seen by BPE in the place format, so every marked digit (hundreds 1-9, tens 0-9)
# becomes one token whatever the corpus: each number from 0 to 999, twice (BPE keeps
# a pair seen at least twice).
_ALL_NUMBERS = [" ".join(str(n) for n in range(NUMBER_TOKENS))] * 2
# GPT-2's pre-tokenization pattern, with a digit (and its place mark) always alone.
_PLACE_SPLIT = (
    r"[\x1c\x1d]?\d|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}\x1c\x1d]+|\s+(?!\S)|\s+"
)
# The `spaced` pattern after the digit part: a contraction only after a letter, letter
# runs, punctuation runs, one space alone, runs of other whitespace.
_SPACED_SPLIT = r"(?<=\p{L})(?:'s|'t|'re|'ve|'m|'ll|'d)|\p{L}+|[^\s\p{L}\p{N}\x1c\x1d]+| |[^\S ]+"


def check_number_format(numbers: str) -> None:
    """ValueError naming the allowed formats unless `numbers` is one of them."""
    if numbers not in NUMBER_FORMATS:
        raise ValueError(
            f"unknown number format {numbers!r} (allowed: {', '.join(NUMBER_FORMATS)})"
        )


def check_word_format(words: str) -> None:
    """ValueError naming the allowed formats unless `words` is one of them."""
    if words not in WORD_FORMATS:
        raise ValueError(f"unknown word format {words!r} (allowed: {', '.join(WORD_FORMATS)})")


def check_vocab_size(vocab_size: int) -> None:
    """ValueError unless the BPE vocabulary holds at least every byte and the specials."""
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size {vocab_size} is below {MIN_VOCAB_SIZE} "
            "(the 256 byte tokens and the two special tokens)"
        )


def train_tokenizer(
    corpus: Iterable[str],
    vocab_size: int = VOCAB_SIZE,
    numbers: str = "place",
    words: str = "attached",
) -> Tokenizer:
    """BPE over bytes with numbers and words in the given formats (see the module
    docstring); `<eos>` is id 0 and `<pad>` id 1."""
    check_number_format(numbers)
    check_word_format(words)
    check_vocab_size(vocab_size)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _pre_tokenizer(numbers, words)
    if numbers == "place":
        tokenizer.normalizer = _place_marks()
        tokenizer.decoder = decoders.Sequence(
            [
                decoders.ByteLevel(),
                decoders.Replace(HUNDREDS_MARK, ""),
                decoders.Replace(TENS_MARK, ""),
            ]
        )
    else:
        tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    if numbers == "place":
        corpus = itertools.chain(corpus, _ALL_NUMBERS)
    tokenizer.train_from_iterator(corpus, trainer)
    if numbers == "whole":
        # Added tokens are matched on the raw text before pre-tokenization, longest
        # first, so "1234" is "123" + "4" and "05" stays "0" + "5". Single digits are
        # already in the BPE vocabulary and keep their ids.
        tokenizer.add_tokens([AddedToken(str(n), normalized=False) for n in range(NUMBER_TOKENS)])
    return tokenizer


def min_token_count(text: str, numbers: str = "place", words: str = "attached") -> int:
    """A lower bound on the tokens of `text` under every tokenizer `train_tokenizer`
    can make with these formats, whatever its corpus and vocabulary: BPE never merges
    across the pieces the (normalizer and) pre-tokenizer cut, and a `whole` number
    token holds at most three digits. It tells before any data is built whether a
    prompt fits the model's positions."""
    check_number_format(numbers)
    check_word_format(words)
    pre_tokenizer = _pre_tokenizer(numbers, words)
    if numbers == "whole":  # numbers are added tokens, matched before pre-tokenizing
        runs = re.findall(r"\d+", text)
        pieces = sum(len(pre_tokenizer.pre_tokenize_str(s)) for s in re.split(r"\d+", text) if s)
        return pieces + sum((len(run) + 2) // 3 for run in runs)
    if numbers == "place":
        text = _place_marks().normalize_str(text)
    return len(pre_tokenizer.pre_tokenize_str(text))


def _pre_tokenizer(numbers: str, words: str) -> pre_tokenizers.PreTokenizer:
    """Splits the text so that digits stand alone (with their place mark in the place
    format) and words meet spaces as `words` says; then maps bytes to characters."""
    if words == "attached" and numbers != "place":  # GPT-2's own pattern after Digits
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
            ]
        )
    if words == "attached":
        pattern = _PLACE_SPLIT
    else:
        digit = r"[\x1c\x1d]?\d" if numbers == "place" else r"\d"
        pattern = f"{digit}|{_SPACED_SPLIT}"
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _place_marks() -> normalizers.Normalizer:
    """Marks each digit with its place: a hundreds digit (two digits follow, then no
    digit) and a tens digit (one follows) get their mark in front. Each rule replaces
    the digit itself (a zero-width insertion at the start of the text makes
    `tokenizers` 0.23 panic), so there are ten rules per place."""
    rules = [
        normalizers.Replace(Regex(f"{digit}(?=\\d{{{after}}}(?!\\d))"), mark + str(digit))
        for mark, after in ((HUNDREDS_MARK, 2), (TENS_MARK, 1))
        for digit in range(10)
    ]
    return normalizers.Sequence(rules)


def save_tokenizer(tokenizer: Tokenizer, out_dir: Path, max_length: int = 2048) -> None:
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
        "model_max_length": max_length,
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
