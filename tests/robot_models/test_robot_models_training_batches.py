"""Training batches: one robot type each, types alternating, similar lengths within a
batch (length bucketing), and every example drawn before any repeats."""

from collections import Counter

from robot_models.training.batches import BUCKET_BATCHES, BatchSampler, EncodedExample, fits


def examples(robot_type: str, count: int) -> list[EncodedExample]:
    return [EncodedExample(robot_type, tuple(range(5 + (i * 37) % 150)), 3) for i in range(count)]


def test_batches_alternate_types_and_cover_every_example_once_per_pass() -> None:
    pool = examples("drone", 8 * 16) + examples("arm", 8 * 16)
    sampler = BatchSampler(pool, batch_size=16, seed=0)
    drawn: Counter[int] = Counter()
    for turn in range(16):
        robot_type, batch = sampler.next()
        assert robot_type == ("drone", "arm")[turn % 2]
        assert len(batch) == 16 and {e.robot_type for e in batch} == {robot_type}
        drawn.update(id(e) for e in batch)
    assert set(drawn.values()) == {1} and len(drawn) == len(pool)


def test_rows_of_a_batch_have_similar_lengths() -> None:
    pool = examples("drone", BUCKET_BATCHES * 16) + examples("arm", BUCKET_BATCHES * 16)
    sampler = BatchSampler(pool, batch_size=16, seed=1)
    spreads = []
    for _ in range(2 * BUCKET_BATCHES):
        _, batch = sampler.next()
        lengths = [len(e.suffix_ids) for e in batch]
        spreads.append(max(lengths) - min(lengths))
    overall = max(len(e.suffix_ids) for e in pool) - min(len(e.suffix_ids) for e in pool)
    assert sum(spreads) / len(spreads) < overall / 4  # unsorted batches span nearly all of it


def test_an_example_fits_when_its_prefix_and_ids_fit_the_positions() -> None:
    example = EncodedExample("arm", tuple(range(10)), 4)
    assert fits(example, {"arm": 90, "drone": 200}, 100)
    assert not fits(example, {"arm": 91, "drone": 0}, 100)
