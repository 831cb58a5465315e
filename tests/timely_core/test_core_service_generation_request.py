"""`PlanningService.generation_request`: an engine, handed only gen_ids, finds the
request (its TUF) of each generation it ranks, from inside the service's loop."""

from __future__ import annotations

import pytest

from tests.timely_core.core_support import make_service
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf

PLANS = {"look for the cat": "mf(50); tl(90); search('cat');", "evade": "mu(30); tr(45);"}


def test_an_engine_finds_the_request_of_each_generation_it_ranks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service, _, engine = make_service(PLANS, robots=("d1", "d2"))
    seen: dict[int, TaskRequest | None] = {}
    rank = engine.set_ranking

    def set_ranking(gen_ids: list[int]) -> None:  # the loop calls it under its lock
        seen.update({g: service.generation_request(g) for g in gen_ids})
        rank(gen_ids)

    monkeypatch.setattr(engine, "set_ranking", set_ranking)
    service.submit(TaskRequest(robot_id="d1", instruction="look for the cat", tuf=Tuf.urgent()))
    service.submit(TaskRequest(robot_id="d2", instruction="evade"))
    service.run_until_idle()
    requests = list(seen.values())
    assert len(seen) == 2 and None not in requests
    assert {r.robot_id: r.tuf for r in requests if r is not None} == {
        "d1": Tuf.urgent(),
        "d2": Tuf.normal(),
    }
    assert [service.generation_request(g) for g in seen] == [None, None]  # both ended
    assert service.generation_request(max(seen) + 1) is None  # never issued
