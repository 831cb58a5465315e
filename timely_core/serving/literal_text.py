"""Text from outside the service is encoded as text, never as control tokens.

An instruction, a scene or a tool's answer that spells a special token (`<eos>`,
`<pad>`) would otherwise be encoded as that token: an operator's typo or a hostile
client could end the prompt, or feed the model ids it never saw inside a request.
The service encodes with a copy of the checkpoint's tokenizer that reads such
text as characters; ids it adds itself (BOS by the post-processor, EOS by the
engine) are unaffected, and the caller's tokenizer is left as it was.
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer


def literal_tokenizer(tokenizer: Any) -> Any:
    """`tokenizer` (a `tokenizers.Tokenizer`) copied to encode special-token text
    literally; any other encoder is returned as it is."""
    if not isinstance(tokenizer, Tokenizer):
        return tokenizer
    literal = Tokenizer.from_str(tokenizer.to_str())
    literal.encode_special_tokens = True
    return literal
