"""The benches that run on the session's real-node cluster (bench-handler's default mode,
bench-import, bench-snapshot) at their smallest sizes, as tests/integration/benches does for
the others: here, so that the real-node cluster is started with the real-node tests rather
than idling through every process-mode module run before them."""

from __future__ import annotations

import pytest

from tests.integration.benches.test_benches import REAL_BENCHES, run_bench

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(("bench", "cluster", "argv", "shown"), REAL_BENCHES)
def test_bench_runs_at_its_smallest_on_real_nodes(
    bench: str,
    cluster: str | None,
    argv: list[str],
    shown: list[str],
    request: pytest.FixtureRequest,
) -> None:
    """scripts/<bench> with its smallest flags, on the session's deployed real-node
    cluster, exits 0 and prints every row of its report."""
    run_bench(bench, cluster, argv, shown=shown, request=request)
