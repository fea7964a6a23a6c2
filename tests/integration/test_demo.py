"""`netaware demo`: the whole suite against the emulator converges and shows every component."""

from __future__ import annotations

import pytest

from operators.demo import run_demo

pytestmark = pytest.mark.integration


async def test_demo_converges_and_shows_every_component() -> None:
    lines: list[str] = []
    code = await run_demo(lines.append, within=60)
    text = "\n".join(lines)
    assert code == 0, text
    for section in (
        "== AppGroups: topology order",
        "== NetworkTopology: network cost between zones and regions",
        "== NodeSLO network QoS",
        "== pods through the webhook",
        "== AppGroup placements",
        "== NetworkTopology allocated bandwidth",
        "== one descheduling cycle (dry run)",
    ):
        assert section in text
    rows = [line.split() for line in text.splitlines()]
    assert ["a1", "KahnSort", "p1", "->", "p2", "->", "p3"] in rows
    assert ["net-topology-test", "NetperfCosts", "zone", "Z1", "Z2", "5"] in rows
    assert rows[next(i for i, row in enumerate(rows) if row[:1] == ["n-5"])][:2] == ["n-5", "10G"]
    # the webhook's patch from the AppGroup (p1 depends on p2 with 100Mi), and the node the extender scored best
    demo_0 = next(row for row in rows if row[:1] == ["a1-p1-demo-0"])
    assert demo_0[1:3] == ["egress-request", "100Mi,"] and demo_0[-1] == "n-2", demo_0
    assert ["a1", "p1", "a1-p1-demo-0", "n-2", "Z1"] in rows
    assert ["n-1", "low", "30.0", "%"] in rows  # p2's pod asks 300M of n-1's 1G: 30 %, at the low threshold
    assert text.endswith("every component converged")


async def test_demo_reports_what_did_not_converge(monkeypatch: pytest.MonkeyPatch) -> None:
    from operators import demo

    monkeypatch.setattr(demo, "CONTROLLERS", ("appgroup",))  # no NetworkTopology controller: costs never come
    lines: list[str] = []
    assert await run_demo(lines.append, within=2) == 1
    assert lines[-1] == "\nNOT CONVERGED: NetworkTopology costs: not reached within 2s"
