"""The Prometheus registry: families, labels, rendering through prometheus_client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.metrics import Registry


def test_counter_renders_help_type_and_series() -> None:
    """A labelled counter renders HELP, TYPE and one line per series."""
    reg = Registry()
    c = reg.counter("kubevirt_x_total", "Things done.", ("code", "verb"))
    c.labels("200", "get").inc()
    c.labels(code="200", verb="get").inc(2)
    c.labels("404", "get").inc()
    assert reg.render() == (
        "# HELP kubevirt_x_total Things done.\n"
        "# TYPE kubevirt_x_total counter\n"
        'kubevirt_x_total{code="200",verb="get"} 3.0\n'
        'kubevirt_x_total{code="404",verb="get"} 1.0\n'
    )
    assert c.value("200", "get") == 3
    assert c.total() == 4


def test_histogram_buckets_are_cumulative() -> None:
    """Histogram buckets count every observation at or below their bound, +Inf last."""
    reg = Registry()
    h = reg.histogram("lat_seconds", "Latency.", ("url",), buckets=(0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 3.0):
        h.labels("/a").observe(v)
    lines = reg.render().splitlines()
    assert lines[2:] == [
        'lat_seconds_bucket{le="0.1",url="/a"} 2.0',
        'lat_seconds_bucket{le="1.0",url="/a"} 3.0',
        'lat_seconds_bucket{le="+Inf",url="/a"} 4.0',
        'lat_seconds_count{url="/a"} 4.0',
        'lat_seconds_sum{url="/a"} 3.65',
    ]


def test_gauge_function_is_read_at_render_time() -> None:
    """A gauge with a function reports the function's value when scraped."""
    reg = Registry()
    state = {"v": 1.0}
    g = reg.gauge("depth", "Depth.")
    g.labels().set_function(lambda: state["v"])
    state["v"] = 7.5
    assert "depth 7.5" in reg.render()


def test_same_family_is_shared() -> None:
    """Asking twice for the same name and shape returns the same family."""
    reg = Registry()
    assert reg.counter("a_total", "A.", ("name",)) is reg.counter("a_total", "A.", ("name",))


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda r: r.gauge("a_total", "A.", ("name",)), id="other-type"),
        pytest.param(lambda r: r.counter("a_total", "A.", ("other",)), id="other-labels"),
    ],
)
def test_conflicting_registration_is_rejected(second: object) -> None:
    """A name cannot be registered again with another type or other label names."""
    reg = Registry()
    reg.counter("a_total", "A.", ("name",))
    with pytest.raises(ValueError, match="another shape"):
        second(reg)  # type: ignore[operator]


def test_label_values_are_escaped() -> None:
    """Quotes, backslashes and newlines in label values are escaped."""
    reg = Registry()
    reg.counter("e_total", "E.", ("v",)).labels('a"b\\c\nd').inc()
    assert 'e_total{v="a\\"b\\\\c\\nd"} 1.0' in reg.render()


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        pytest.param(("x",), {}, id="too-few"),
        pytest.param((), {"a": "x"}, id="missing-by-name"),
        pytest.param((), {"a": "x", "b": "y", "c": "z"}, id="unknown-by-name"),
    ],
)
def test_wrong_labels_are_rejected(args: tuple[str, ...], kwargs: dict[str, str]) -> None:
    """Label values must match the declared label names exactly."""
    c = Registry().counter("l_total", "L.", ("a", "b"))
    with pytest.raises(ValueError):
        c.labels(*args, **kwargs)


def test_counter_names_end_in_total() -> None:
    """A counter named otherwise is refused rather than exposed under another name."""
    with pytest.raises(ValueError, match="_total"):
        Registry().counter("kubevirt_things", "T.")


def test_counters_only_go_up() -> None:
    """A negative increment is refused."""
    with pytest.raises(ValueError):
        Registry().counter("c_total", "C.").labels().inc(-1)


def test_custom_collectors_are_served_with_the_families() -> None:
    """A collector added to the registry is asked at render time, beside the families,
    and the whole exposition parses as Prometheus text."""

    class Info:
        def collect(self) -> Iterator[Metric]:
            family = GaugeMetricFamily("kubevirt_vmi_info", "Info.", labels=("name",))
            family.add_metric(("demo",), 1.0)
            yield family

    reg = Registry()
    reg.counter("a_total", "A.").labels().inc()
    reg.add(Info())
    families = {f.name: f for f in text_string_to_metric_families(reg.render())}
    assert families["kubevirt_vmi_info"].samples[0].labels == {"name": "demo"}
    assert families["a"].type == "counter"
