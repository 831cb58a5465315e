"""`Example.pieces` and `Example.with_pieces`: a plan with observations split into
the pieces the service sees arrive, and joined back, is the same example."""

from __future__ import annotations

from robot_models.dataset.example import Example


def test_pieces_joined_back_are_the_same_example() -> None:
    pieces = [
        ("tk();mf(100);", False),
        ("\nmf(100)->failed('timeout')\n", True),
        ("mf(100);", False),
        ("\nlk('cup')->True\n", True),
        ("ld();", False),
    ]
    plain = Example("drone", "visible: cup", "fly forward 1 m", "tk();mf(100);ld();", "motion")
    joined = plain.with_pieces(pieces, "motion+retry")
    assert joined.plan == "".join(text for text, _ in pieces)
    assert joined.family == "motion+retry" and joined.instruction == plain.instruction
    assert [joined.plan[a:b] for a, b in joined.observed] == [pieces[1][0], pieces[3][0]]
    assert joined.pieces() == pieces
    assert joined.with_pieces(joined.pieces(), joined.family) == joined
