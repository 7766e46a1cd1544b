"""A small Prometheus registry: counters, gauges and histograms with labels, text format 0.0.4.

Why not prometheus-client: the daemons need a few dozen series, readable from tests and
benchmarks without scraping, and no process-global default registry (each daemon — and
each test — builds its own `Registry` and passes it in).

Families are get-or-create: asking twice for the same name, type and label names returns
the same family, so every work queue shares `kubevirt_workqueue_*` and differs by label.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, Generic, TypeVar

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


class _Family(Generic[_Child]):
    """A metric name with its label names and one child per label-value combination."""

    TYPE: ClassVar[str] = ""

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

    def render(self) -> Iterator[str]:
        """The text-format lines of this family."""
        yield f"# HELP {self.name} {_escape_help(self.help)}"
        yield f"# TYPE {self.name} {self.TYPE}"
        for values, child in self.series():
            yield from self._render_child(values, child)

    def _render_child(self, values: LabelValues, child: _Child) -> Iterator[str]:
        raise NotImplementedError


class Counter(_Family[CounterChild]):
    """A monotonically increasing count."""

    TYPE = "counter"

    def _new_child(self) -> CounterChild:
        return CounterChild()

    def value(self, *values: str, **by_name: str) -> float:
        """The current count of one series (0 when never incremented)."""
        return self.labels(*values, **by_name).value

    def total(self) -> float:
        """The sum over every series."""
        return sum(c.value for _, c in self.series())

    def _render_child(self, values: LabelValues, child: CounterChild) -> Iterator[str]:
        yield f"{self.name}{_labels(self.label_names, values)} {_num(child.value)}"


class Gauge(_Family[GaugeChild]):
    """A value that goes up and down."""

    TYPE = "gauge"

    def _new_child(self) -> GaugeChild:
        return GaugeChild()

    def value(self, *values: str, **by_name: str) -> float:
        """The current value of one series."""
        return self.labels(*values, **by_name).value

    def _render_child(self, values: LabelValues, child: GaugeChild) -> Iterator[str]:
        yield f"{self.name}{_labels(self.label_names, values)} {_num(child.value)}"


class Histogram(_Family[HistogramChild]):
    """Observations counted into cumulative buckets."""

    TYPE = "histogram"

    def __init__(
        self, name: str, help_text: str, label_names: Sequence[str], *, buckets: Sequence[float]
    ) -> None:
        super().__init__(name, help_text, label_names)
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError(f"{name}: buckets must be non-empty, sorted and unique")
        self.buckets = tuple(float(b) for b in buckets)

    def _new_child(self) -> HistogramChild:
        return HistogramChild(self.buckets)

    def _render_child(self, values: LabelValues, child: HistogramChild) -> Iterator[str]:
        names = (*self.label_names, "le")
        for bound, total in child.cumulative():
            yield f"{self.name}_bucket{_labels(names, (*values, _num(bound)))} {total}"
        plain = _labels(self.label_names, values)
        yield f"{self.name}_sum{plain} {_num(child.sum)}"
        yield f"{self.name}_count{plain} {child.count}"


_F = TypeVar("_F", Counter, Gauge, Histogram)


class Registry:
    """The families of one daemon (or one test), rendered together for /metrics."""

    def __init__(self) -> None:
        self._families: dict[str, Counter | Gauge | Histogram] = {}

    def counter(self, name: str, help_text: str, labels: Sequence[str] = ()) -> Counter:
        """Get or create a counter family."""
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

    def get(self, name: str) -> Counter | Gauge | Histogram | None:
        """The family of this name, if registered."""
        return self._families.get(name)

    def render(self) -> str:
        """Every family in the Prometheus text exposition format."""
        lines = [line for f in self._families.values() for line in f.render()]
        return "\n".join(lines) + "\n" if lines else ""

    def _register(
        self, family: Counter | Gauge | Histogram, kind: type[_F], labels: Sequence[str]
    ) -> _F:
        if not isinstance(family, kind) or family.label_names != tuple(labels):
            raise ValueError(f"metric {family.name} already registered with another shape")
        self._families.setdefault(family.name, family)
        return family


def _num(value: float) -> str:
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _labels(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{_escape_value(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"
