"""Each daemon's Prometheus registry: counters, gauges and histograms with labels, served
through prometheus_client's `CollectorRegistry` and its text exposition.

Every family here is a prometheus_client custom collector over plain value holders, so
tests and benchmarks read values without scraping, and there is no process-global
default registry (each daemon — and each test — builds its own `Registry` and passes it
in). Collectors computed at scrape time (the handler's per-VMI domain stats, the
controller's VMI/VM/VMIM info series) are added with `Registry.add`.

Families are get-or-create: asking twice for the same name, type and label names returns
the same family, so every work queue shares `kubevirt_workqueue_*` and differs by label.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

# Prometheus' default buckets (seconds).
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
# client-go's work-queue buckets: 1 µs … 10 s, ten per decade in powers of ten.
WORKQUEUE_BUCKETS: tuple[float, ...] = tuple(10.0**e for e in range(-8, 2))

LabelValues = tuple[str, ...]


class CounterChild:
    """One labelled series of a counter: only goes up."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add `amount` (must be ≥ 0)."""
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class GaugeChild:
    """One labelled series of a gauge: set directly or computed at scrape time."""

    __slots__ = ("_fn", "_value")

    def __init__(self) -> None:
        self._value = 0.0
        self._fn: Callable[[], float] | None = None

    @property
    def value(self) -> float:
        """The current value (calls the function when one is set)."""
        return self._fn() if self._fn is not None else self._value

    def set(self, value: float) -> None:
        """Set the value."""
        self._value = value

    def inc(self, amount: float = 1.0) -> None:
        """Add `amount`."""
        self._value += amount

    def dec(self, amount: float = 1.0) -> None:
        """Subtract `amount`."""
        self._value -= amount

    def set_function(self, fn: Callable[[], float]) -> None:
        """Compute the value with `fn` at every read (e.g. the longest-running worker)."""
        self._fn = fn


class HistogramChild:
    """One labelled series of a histogram: per-bucket counts, sum and count."""

    __slots__ = ("buckets", "count", "counts", "sum")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last slot is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Record one observation."""
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, cumulative count) per bucket, +Inf last."""
        out, total = [], 0
        for bound, n in zip((*self.buckets, math.inf), self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


_Child = TypeVar("_Child", CounterChild, GaugeChild, HistogramChild)


class _Family(Collector, Generic[_Child]):
    """A metric name with its label names and one child per label-value combination."""

    def __init__(self, name: str, help_text: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.label_names: LabelValues = tuple(label_names)
        self._children: dict[LabelValues, _Child] = {}

    def _new_child(self) -> _Child:
        raise NotImplementedError

    def labels(self, *values: str, **by_name: str) -> _Child:
        """The child for these label values (positional in declared order, or by name)."""
        if by_name:
            if values:
                raise ValueError("pass label values positionally or by name, not both")
            try:
                values = tuple(by_name[n] for n in self.label_names)
            except KeyError as e:
                raise ValueError(f"{self.name}: missing label {e.args[0]!r}") from None
            if len(by_name) != len(self.label_names):
                raise ValueError(f"{self.name}: unknown labels {sorted(by_name)}")
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name}: expected labels {self.label_names}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._new_child()
        return child

    def remove(self, *values: str) -> None:
        """Drop one series (e.g. a deleted VMI's)."""
        self._children.pop(tuple(values), None)

    def series(self) -> Iterator[tuple[LabelValues, _Child]]:
        """Every (label values, child) pair, in insertion order."""
        return iter(list(self._children.items()))

    def collect(self) -> Iterable[Metric]:
        """prometheus_client's collector protocol: this family with every series."""
        yield self._metric()

    def _metric(self) -> Metric:
        raise NotImplementedError


class Counter(_Family[CounterChild]):
    """A monotonically increasing count."""

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def value(self, *values: str, **by_name: str) -> float:
        """The current count of one series (0 when never incremented)."""
        return self.labels(*values, **by_name).value

    def total(self) -> float:
        """The sum over every series."""
        return sum(c.value for _, c in self.series())

    def _metric(self) -> Metric:
        family = CounterMetricFamily(self.name, self.help, labels=self.label_names)
        for values, child in self.series():
            family.add_metric(values, child.value)
        return family


class Gauge(_Family[GaugeChild]):
    """A value that goes up and down."""

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def value(self, *values: str, **by_name: str) -> float:
        """The current value of one series."""
        return self.labels(*values, **by_name).value

    def _metric(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.help, labels=self.label_names)
        for values, child in self.series():
            family.add_metric(values, child.value)
        return family


class Histogram(_Family[HistogramChild]):
    """Observations counted into cumulative buckets."""

    def __init__(
        self, name: str, help_text: str, label_names: Sequence[str], *, buckets: Sequence[float]
    ) -> None:
        super().__init__(name, help_text, label_names)
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError(f"{name}: buckets must be non-empty, sorted and unique")
        self.buckets = tuple(float(b) for b in buckets)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.buckets)

    def _metric(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.help, labels=self.label_names)
        for values, child in self.series():
            buckets = [(_bound(bound), float(n)) for bound, n in child.cumulative()]
            family.add_metric(list(values), buckets, child.sum)
        return family


_F = TypeVar("_F", Counter, Gauge, Histogram)


class Registry:
    """The metrics of one daemon (or one test): a prometheus_client `CollectorRegistry`
    holding this module's families and any custom collectors, rendered together."""

    def __init__(self) -> None:
        self._families: dict[str, Counter | Gauge | Histogram] = {}
        self.prometheus = CollectorRegistry(auto_describe=False)

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        """Get or create a counter family; its name ends in _total (prometheus_client would
        otherwise expose it under another name)."""
        if not name.endswith("_total"):
            raise ValueError(f"counter {name}: the name must end in _total")
        family = self._families.get(name) or Counter(name, help_text, labels)
        return self._register(family, Counter, labels)

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Gauge:
        """Get or create a gauge family."""
        family = self._families.get(name) or Gauge(name, help_text, labels)
        return self._register(family, Gauge, labels)

    def histogram(
        self,
        name: str,
        help_text: str,
        labels: Sequence[str] = (),
        *,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> Histogram:
        """Get or create a histogram family."""
        family = self._families.get(name) or Histogram(name, help_text, labels, buckets=buckets)
        return self._register(family, Histogram, labels)

    def add(self, collector: Collector) -> None:
        """Register a custom collector, asked for its families at every scrape."""
        self.prometheus.register(collector)

    def get(self, name: str) -> Counter | Gauge | Histogram | None:
        """The family of this name, if registered."""
        return self._families.get(name)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample's value as a scrape would show it (None when absent); for tests."""
        return self.prometheus.get_sample_value(name, labels or {})

    def render(self) -> str:
        """Everything registered, in the Prometheus text exposition format (0.0.4)."""
        return generate_latest(self.prometheus).decode()

    def _register(
        self, family: Counter | Gauge | Histogram, kind: type[_F], labels: Sequence[str]
    ) -> _F:
        if not isinstance(family, kind) or family.label_names != tuple(labels):
            raise ValueError(f"metric {family.name} already registered with another shape")
        if family.name not in self._families:
            self._families[family.name] = family
            self.prometheus.register(family)
        return family


def _bound(bound: float) -> str:
    """A bucket's `le` as Prometheus writes it (1.0, 0.25, +Inf)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))
