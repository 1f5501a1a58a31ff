"""Operations for every long-running component: metrics, health endpoints, logs, graceful shutdown.

* A small thread-safe metrics registry (:class:`Registry` with :class:`Counter`, :class:`Gauge`,
  :class:`Histogram`) rendered in the Prometheus text exposition format 0.0.4, and the metric
  names every toposched component uses (:class:`Metrics`).
* :class:`OpsServer`: ``/metrics``, ``/healthz`` and ``/readyz`` on a background HTTP server.
* :func:`configure_logging`: one handler on the root logger, JSON lines or plain text.
* :func:`shutdown_event`: SIGTERM/SIGINT set a :class:`threading.Event` the main loop watches.

The format is written here rather than taken from prometheus-client so the project keeps its
dependency list; docs/install.md lists the metrics.
"""

from __future__ import annotations

import bisect
import gc
import json
import logging
import math
import re
import signal
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toposched.errors import InputError

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_BUCKETS",
    "Counter",
    "Gauge",
    "Histogram",
    "JSONFormatter",
    "Metrics",
    "OpsServer",
    "Registry",
    "configure_logging",
    "freeze_heap",
    "parse_listen_address",
    "shutdown_event",
]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# prometheus-client's defaults: 5 ms to 10 s, which covers a scheduling cycle and an API call.
DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


# ---- the exposition format -------------------------------------------------------------------


def _format_value(value: float) -> str:
    """A sample value as the text format writes it: integers without a fraction, ``+Inf``, ``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _labels_text(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{name}="{_escape_label_value(value)}"' for name, value in pairs) + "}"


# ---- metrics -----------------------------------------------------------------------------------


class _Metric(ABC):
    """What every metric shares: a name, help text, label names and one child per label-value tuple."""

    type_name = ""

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        if not _METRIC_NAME.match(name):
            raise InputError(f"{name!r} is not a Prometheus metric name", field="name", source="metrics registry")
        labelnames = tuple(labelnames)
        for label in labelnames:
            if not _LABEL_NAME.match(label) or label.startswith("__"):
                raise InputError(f"{label!r} is not a Prometheus label name", field=f"{name}.labelnames",
                                 source="metrics registry")
        if len(set(labelnames)) != len(labelnames):
            raise InputError(f"label names repeat: {labelnames}", field=f"{name}.labelnames", source="metrics registry")
        self.name = name
        self.help = help
        self.labelnames = labelnames
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ...], Any] = {}
        if not labelnames:
            self._children[()] = self._new_child()

    @abstractmethod
    def _new_child(self) -> Any:
        """A fresh child (the state of one label-value tuple)."""

    def labels(self, *values: str, **named: str) -> Any:
        """The child for these label values (positional in label-name order, or by name); created on first use."""
        if values and named:
            raise InputError("give label values by position or by name, not both", field=self.name,
                             source="metrics registry")
        if named:
            if set(named) != set(self.labelnames):
                raise InputError(f"labels {sorted(named)} do not match {list(self.labelnames)}", field=self.name,
                                 source="metrics registry")
            values = tuple(named[label] for label in self.labelnames)
        if len(values) != len(self.labelnames):
            raise InputError(f"{len(values)} label values for labels {list(self.labelnames)}", field=self.name,
                             source="metrics registry")
        key = tuple(str(v) for v in values)
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._new_child()
            return child

    def _only_child(self) -> Any:
        if self.labelnames:
            raise InputError(f"{self.name} has labels {list(self.labelnames)}: use .labels(...)", field=self.name,
                             source="metrics registry")
        return self._children[()]

    def _snapshot(self) -> list[tuple[tuple[tuple[str, str], ...], Any]]:
        with self._lock:
            items = sorted(self._children.items())
        return [(tuple(zip(self.labelnames, key)), child) for key, child in items]

    def sample_names(self) -> set[str]:
        """The names this metric's samples carry in the exposition."""
        return {self.name}

    def samples(self) -> Iterator[tuple[str, tuple[tuple[str, str], ...], float]]:
        """Every sample: (sample name, label pairs, value), children in label-value order.

        One ``name{labels} value`` per child; a histogram yields its buckets, sum and count instead.
        """
        for pairs, child in self._snapshot():
            yield self.name, pairs, child.value

    def render(self) -> str:
        """The HELP and TYPE lines and the samples in the text format, each line ending in a newline."""
        lines = [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.type_name}"]
        lines += [f"{name}{_labels_text(pairs)} {_format_value(value)}" for name, pairs, value in self.samples()]
        return "\n".join(lines) + "\n"


class _CounterChild:
    def __init__(self, lock: threading.Lock):
        self._lock = lock
        self._value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (≥ 0): a counter only goes up."""
        if amount < 0:
            raise InputError(f"a counter cannot decrease (inc by {amount})", source="metrics registry")
        with self._lock:
            self._value += amount

    @property
    def value(self) -> float:
        """The current total."""
        with self._lock:
            return self._value


class Counter(_Metric):
    """A monotonically increasing total. Its name should end in ``_total``."""

    type_name = "counter"

    def _new_child(self) -> _CounterChild:
        return _CounterChild(self._lock)

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` to an unlabelled counter."""
        self._only_child().inc(amount)

    @property
    def value(self) -> float:
        """The total of an unlabelled counter."""
        return self._only_child().value


class _GaugeChild:
    def __init__(self, lock: threading.Lock):
        self._lock = lock
        self._value = 0.0
        self._function: Callable[[], float] | None = None

    def set(self, value: float) -> None:
        """Set the value (and forget a function set before)."""
        with self._lock:
            self._value, self._function = float(value), None

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (may be negative)."""
        with self._lock:
            self._value += amount

    def dec(self, amount: float = 1.0) -> None:
        """Subtract ``amount``."""
        self.inc(-amount)

    def set_function(self, function: Callable[[], float]) -> None:
        """Read the value from ``function`` at every scrape (e.g. the age of the oldest report)."""
        with self._lock:
            self._function = function

    @property
    def value(self) -> float:
        """The current value; a failing function reads as NaN and is logged."""
        with self._lock:
            function, value = self._function, self._value
        if function is None:
            return value
        try:
            return float(function())
        except Exception:  # a metric must never break a scrape
            log.exception("gauge function failed")
            return math.nan


class Gauge(_Metric):
    """A value that goes up and down."""

    type_name = "gauge"

    def _new_child(self) -> _GaugeChild:
        return _GaugeChild(self._lock)

    def set(self, value: float) -> None:
        """Set an unlabelled gauge."""
        self._only_child().set(value)

    def inc(self, amount: float = 1.0) -> None:
        """Add to an unlabelled gauge."""
        self._only_child().inc(amount)

    def dec(self, amount: float = 1.0) -> None:
        """Subtract from an unlabelled gauge."""
        self._only_child().dec(amount)

    def set_function(self, function: Callable[[], float]) -> None:
        """Compute an unlabelled gauge at scrape time."""
        self._only_child().set_function(function)

    @property
    def value(self) -> float:
        """The value of an unlabelled gauge."""
        return self._only_child().value


class _HistogramChild:
    def __init__(self, lock: threading.Lock, bounds: tuple[float, ...]):
        self._lock = lock
        self._bounds = bounds
        self._counts = [0] * len(bounds)  # per bucket, not cumulative; the last bound is +Inf
        self._sum = 0.0

    def observe(self, value: float) -> None:
        """Record one observation (a duration in seconds, an age, ...)."""
        # ``le`` buckets: the first bound at or above the value; NaN counts in +Inf, as Go's client does.
        index = len(self._bounds) - 1 if math.isnan(value) else bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        """Cumulative (upper bound, count) pairs ending with +Inf, the sum and the count."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, running = [], 0
        for bound, count in zip(self._bounds, counts):
            running += count
            cumulative.append((bound, running))
        return cumulative, total, running


class Histogram(_Metric):
    """Observations counted into cumulative buckets, with their sum and count (``_bucket``/``_sum``/``_count``)."""

    type_name = "histogram"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 buckets: Iterable[float] = DEFAULT_BUCKETS):
        given = tuple(buckets)
        bounds = sorted(float(b) for b in given)
        if not bounds or len(set(bounds)) != len(bounds) or any(math.isnan(b) for b in bounds):
            raise InputError(f"bucket bounds must be distinct numbers, got {list(given)}", field=f"{name}.buckets",
                             source="metrics registry")
        if "le" in labelnames:
            raise InputError("a histogram cannot have a label named 'le'", field=f"{name}.labelnames",
                             source="metrics registry")
        if bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = tuple(bounds)
        super().__init__(name, help, labelnames)

    def _new_child(self) -> _HistogramChild:
        return _HistogramChild(self._lock, self.bounds)

    def sample_names(self) -> set[str]:
        """``_bucket``, ``_sum`` and ``_count`` of the name."""
        return {self.name + suffix for suffix in ("_bucket", "_sum", "_count")}

    def observe(self, value: float) -> None:
        """Record one observation on an unlabelled histogram."""
        self._only_child().observe(value)

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        """Cumulative buckets, sum and count of an unlabelled histogram."""
        return self._only_child().snapshot()

    def samples(self) -> Iterator[tuple[str, tuple[tuple[str, str], ...], float]]:
        """Per child: one ``_bucket`` sample per bound (cumulative, ``le`` last), then ``_sum`` and ``_count``."""
        for pairs, child in self._snapshot():
            buckets, total, count = child.snapshot()
            for bound, running in buckets:
                yield f"{self.name}_bucket", pairs + (("le", _format_value(bound)),), running
            yield f"{self.name}_sum", pairs, total
            yield f"{self.name}_count", pairs, count


class Registry:
    """The metrics of one process (one per component instance), rendered together for ``/metrics``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: dict[str, _Metric] = {}

    def _get_or_add(self, metric: _Metric) -> Any:
        with self._lock:
            existing = self._metrics.get(metric.name)
            if existing is not None:
                same = (type(existing) is type(metric) and existing.help == metric.help
                        and existing.labelnames == metric.labelnames
                        and getattr(existing, "bounds", None) == getattr(metric, "bounds", None))
                if not same:
                    raise InputError(f"{metric.name} is registered already with another definition", field="name",
                                     source="metrics registry")
                return existing
            taken = {name for other in self._metrics.values() for name in other.sample_names()}
            clash = metric.sample_names() & taken
            if clash:
                raise InputError(f"{metric.name} would expose {sorted(clash)[0]}, which another metric exposes",
                                 field="name", source="metrics registry")
            self._metrics[metric.name] = metric
            return metric

    def counter(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Counter:
        """The counter ``name``, registered now or the same definition registered before."""
        return self._get_or_add(Counter(name, help, labelnames))

    def gauge(self, name: str, help: str, labelnames: Sequence[str] = ()) -> Gauge:
        """The gauge ``name``, registered now or the same definition registered before."""
        return self._get_or_add(Gauge(name, help, labelnames))

    def histogram(self, name: str, help: str, labelnames: Sequence[str] = (),
                  buckets: Iterable[float] = DEFAULT_BUCKETS) -> Histogram:
        """The histogram ``name``, registered now or the same definition registered before."""
        return self._get_or_add(Histogram(name, help, labelnames, buckets))

    def get(self, name: str) -> Counter | Gauge | Histogram | None:
        """The metric registered as ``name``, if any."""
        with self._lock:
            return self._metrics.get(name)

    def render(self) -> str:
        """Every metric in the Prometheus text format 0.0.4, in registration order."""
        with self._lock:
            metrics = list(self._metrics.values())
        return "".join(metric.render() for metric in metrics)


@dataclass(frozen=True)
class Metrics:
    """The metrics toposched's components report, by one name each; :meth:`register` creates them.

    Label values (the small closed sets that keep cardinality low) are listed in docs/install.md.
    """

    scheduling_attempts: Counter
    scheduling_duration: Histogram
    admission_rejections: Counter
    cache_report_age: Gauge
    extender_requests: Counter
    extender_request_duration: Histogram
    agent_cgroup_writes: Counter
    nrt_publishes: Counter
    controller_nrt_updates: Counter
    controller_source_reads: Counter

    @classmethod
    def register(cls, registry: Registry) -> Metrics:
        """Register (or find, when registered before) every toposched metric in ``registry``."""
        return cls(
            scheduling_attempts=registry.counter(
                "toposched_scheduling_attempts_total",
                "Scheduling attempts by result: scheduled, unschedulable or error.", ["result"]),
            scheduling_duration=registry.histogram(
                "toposched_scheduling_duration_seconds",
                "Time one scheduling attempt took, from taking the pod off the queue to its decision."),
            admission_rejections=registry.counter(
                "toposched_admission_rejections_total",
                "Placements the node refused after binding (the kubelet's TopologyAffinityError, "
                "or the agent refusing a placement), by reason.", ["reason"]),
            cache_report_age=registry.gauge(
                "toposched_cache_report_age_seconds",
                "Age of the oldest NodeResourceTopology report in the scheduler's cache."),
            extender_requests=registry.counter(
                "toposched_extender_requests_total",
                "Extender calls from kube-scheduler by verb (filter, prioritize, bind, preempt) and HTTP code.",
                ["verb", "code"]),
            extender_request_duration=registry.histogram(
                "toposched_extender_request_duration_seconds",
                "Time the extender took to answer one call, by verb.", ["verb"]),
            agent_cgroup_writes=registry.counter(
                "toposched_agent_cgroup_writes_total",
                "cpuset writes the agent planned, by result: written, refused, failed or dry_run.", ["result"]),
            nrt_publishes=registry.counter(
                "toposched_nrt_publishes_total",
                "NodeResourceTopology objects the agent published."),
            controller_nrt_updates=registry.counter(
                "toposched_controller_nrt_updates_total",
                "Zone-attribute writes of the controller by result: updated, conflict or error.", ["result"]),
            controller_source_reads=registry.counter(
                "toposched_controller_source_reads_total",
                "Reads of the controller's source document by result: ok or error.", ["result"]),
        )


# ---- the ops HTTP server -----------------------------------------------------------------------


def parse_listen_address(text: str) -> tuple[str, int]:
    """``"0.0.0.0:9090"``, ``":9090"`` or ``"[::]:9090"`` as (host, port); an empty host means all interfaces."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InputError(f"{text!r} is not HOST:PORT with a port from 0 to 65535", field="address")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise InputError(f"{text!r}: write an IPv6 host in brackets, e.g. [::]:9090", field="address")
    return host or "0.0.0.0", int(port_text)


class OpsServer:
    """``/metrics`` (the registry), ``/healthz`` (the process answers) and ``/readyz`` (``ready()``) over HTTP.

    Runs a ThreadingHTTPServer in a daemon thread between :meth:`start` and :meth:`stop` (or as
    a context manager). ``port=0`` picks a free port; :attr:`port` tells which.
    """

    def __init__(self, registry: Registry, *, ready: Callable[[], bool], host: str = "0.0.0.0", port: int = 9090):
        self.registry = registry
        self._ready = ready
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://host:port`` of the server (127.0.0.1 when it listens on every interface)."""
        host = self._server.server_address[0]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"

    def is_ready(self) -> bool:
        """``ready()``, with an exception counted as not ready (and logged)."""
        try:
            return bool(self._ready())
        except Exception:
            log.exception("readiness check failed")
            return False

    def start(self) -> OpsServer:
        """Serve in a background thread; returns self."""
        if self._thread is None:
            # A short poll interval makes stop() quick; the loop is idle between requests anyway.
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="toposched-ops", daemon=True)
            self._thread.start()
            log.info("ops server listening", extra={"url": self.url})
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> OpsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        ops = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the name http.server dispatches to)
                self._answer(send_body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(send_body=False)

            def _answer(self, *, send_body: bool) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    code, ctype, body = 200, CONTENT_TYPE, ops.registry.render()
                elif path == "/healthz":
                    code, ctype, body = 200, "text/plain; charset=utf-8", "ok\n"
                elif path == "/readyz":
                    ok = ops.is_ready()
                    code, ctype, body = (200 if ok else 503), "text/plain; charset=utf-8", \
                        ("ok\n" if ok else "not ready\n")
                else:
                    code, ctype, body = 404, "text/plain; charset=utf-8", "not found\n"
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if send_body:
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("ops request: " + format, *args)

        return Handler


# ---- logging -----------------------------------------------------------------------------------

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged as a field.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (RFC 3339, UTC, milliseconds), ``level``, ``logger``, ``msg``,
    the record's ``extra`` fields, and ``exc`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON; values JSON cannot hold are written with ``str``."""
        stamp = datetime.fromtimestamp(record.created, tz=UTC)
        out: dict[str, Any] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _TextFormatter(logging.Formatter):
    """``time level logger: msg key=value ...``: the extra fields stay visible in text logs too."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = [f"{k}={v}" for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES]
        if extra:
            first, newline, rest = text.partition("\n")
            text = first + " " + " ".join(extra) + newline + rest
        return text


_HANDLER_NAME = "toposched"


def configure_logging(format: str = "json", level: str | int = "INFO", *, stream: Any = None) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as JSON lines (``format="json"``) or text; returns the handler.

    Calling it again replaces the handler it installed before (other handlers stay).
    """
    if format not in ("json", "text"):
        raise InputError(f"log format {format!r} is not json or text", field="log-format")
    if isinstance(level, str):
        numeric = logging.getLevelName(level.upper())
        if not isinstance(numeric, int):
            raise InputError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
                             field="log-level")
        level = numeric
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JSONFormatter() if format == "json" else _TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


# ---- graceful shutdown -------------------------------------------------------------------------


def shutdown_event(signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> threading.Event:
    """An Event that SIGTERM or SIGINT sets, for ``run(stop)`` loops to finish their round and return.

    Must be called from the main thread (Python delivers signals there).
    """
    event = threading.Event()

    def handle(signum: int, frame: object) -> None:
        log.info("shutdown requested", extra={"signal": signal.Signals(signum).name})
        event.set()

    for sig in signals:
        signal.signal(sig, handle)
    return event


# ---- the heap of a long-running process --------------------------------------------------------


def freeze_heap() -> int:
    """Move every object alive now out of the cyclic garbage collector's sight; returns how many.

    Called once the cluster has first been listed in full: the cluster model (nodes, machines,
    kubelet replicas, the node table) then lives as long as the process, and without this every
    full collection walks all of it again (about 15% of a scheduling loop at 5,000 nodes).
    Objects created later (pods, reservations, changed nodes) are collected as usual. No
    collection runs first: the lists' JSON is acyclic and already freed by reference counting,
    and a full collection of that heap took 2 s of the scheduler's start-up at 5,000 nodes.
    """
    gc.freeze()
    return gc.get_freeze_count()
