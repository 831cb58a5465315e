"""The planner tokenizer: digits never merge with other text in BPE; with number
tokens every whole number 0..999 is one token, so a plan copies a number as one."""

from tokenizers import Tokenizer

from robot_models.training.tokenizer import NUMBER_TOKENS, train_tokenizer

CORPUS = [
    "Go left 66 cm, then turn left by 135 degrees",
    "ml(66);tu(135);",
    "Move the gripper to x 400, y -200, z 50",
    "mt(400,-200,50);og();",
] * 20


def _tokens(tokenizer: Tokenizer, text: str) -> list[str]:
    return list(tokenizer.encode(text).tokens)


def test_every_number_below_1000_is_one_token_and_decodes_back() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, number_tokens=True)
    for number in range(NUMBER_TOKENS):
        ids = tokenizer.encode(str(number)).ids
        assert len(ids) == 1, number
        assert tokenizer.decode(ids) == str(number)
    assert tokenizer.decode(tokenizer.encode("mt(400,-200,50);").ids) == "mt(400,-200,50);"


def test_longer_digit_runs_split_leftmost_and_leading_zeros_stay_digits() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, number_tokens=True)
    assert _tokens(tokenizer, "1234") == ["123", "4"]
    assert _tokens(tokenizer, "05") == ["0", "5"]
    assert "66" in _tokens(tokenizer, "ml(66);")
    assert _tokens(tokenizer, "-200")[-1] == "200"


def test_no_bpe_token_mixes_digits_with_other_characters() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, number_tokens=True)
    for token in tokenizer.get_vocab():
        if any(c.isdigit() for c in token):
            assert token.isdigit(), token


def test_without_number_tokens_digits_are_single_tokens() -> None:
    tokenizer = train_tokenizer(CORPUS, vocab_size=300, number_tokens=False)
    assert _tokens(tokenizer, "400") == ["4", "0", "0"]
