"""Operations: the metrics registry and its text exposition, the ops HTTP server, logging, shutdown.

The exposition is parsed back line by line with a parser written here from the Prometheus text
format 0.0.4 specification (prometheus/docs content/docs/instrumenting/exposition_formats.md):
``# HELP name text`` (``\\\\`` and ``\\n`` escaped), ``# TYPE name counter|gauge|histogram``, samples
``name{label="value",...} value`` with ``\\\\``, ``\\"`` and ``\\n`` escaped in label values,
histograms as cumulative ``_bucket{le=...}`` ending in ``le="+Inf"`` plus ``_sum`` and ``_count``.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import signal
import threading

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.kube.ops import (
    CONTENT_TYPE,
    Metrics,
    OpsServer,
    Registry,
    configure_logging,
    freeze_heap,
    parse_listen_address,
    shutdown_event,
)

# ---- a parser for the text format ---------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(\{{.*\}})? (\S+)$")


def _unescape(text: str, escapes: dict[str, str]) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            out.append(escapes[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    body, i = text[1:-1], 0
    while i < len(body):
        m = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="').match(body, i)
        assert m, f"bad label at {body[i:]!r}"
        j = m.end()
        raw = []
        while body[j] != '"':
            raw.append(body[j:j + 2] if body[j] == "\\" else body[j])
            j += 2 if body[j] == "\\" else 1
        assert m.group(1) not in labels
        labels[m.group(1)] = _unescape("".join(raw), {"\\": "\\", '"': '"', "n": "\n"})
        i = j + 1
        if i < len(body):
            assert body[i] == ",", body
            i += 1
    return labels


def _value(text: str) -> float:
    return {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(text) or float(text)


def parse_exposition(text: str) -> dict[str, dict]:
    """{metric name: {"help", "type", "samples": [(sample name, labels, value)]}}; asserts the grammar."""
    assert text.endswith("\n")
    families: dict[str, dict] = {}
    current = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"{name} described twice"
            current = families[name] = {"help": _unescape(help_text, {"\\": "\\", "n": "\n"}), "samples": []}
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert current is families[name] and kind in ("counter", "gauge", "histogram", "summary", "untyped")
            assert not current["samples"], "TYPE must come before the samples"
            current["type"] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, labels, value = m.group(1), _parse_labels(m.group(2)) if m.group(2) else {}, _value(m.group(3))
            family = current["type"]
            allowed = {name} if family != "histogram" else {
                f"{n}{s}" for n in families for s in ("_bucket", "_sum", "_count")}
            assert name in allowed or name in families, f"{name} outside its family"
            current["samples"].append((name, labels, value))
    return families


def check_histogram(family: dict, name: str) -> list[dict]:
    """The series of a histogram family: cumulative buckets ending at +Inf, count = +Inf bucket."""
    series: dict[tuple, dict] = {}
    for sample, labels, value in family["samples"]:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        entry = series.setdefault(key, {"buckets": [], "labels": dict(key)})
        if sample == f"{name}_bucket":
            entry["buckets"].append((_value(labels["le"]), value))
        elif sample == f"{name}_sum":
            entry["sum"] = value
        else:
            assert sample == f"{name}_count"
            entry["count"] = value
    for entry in series.values():
        bounds = [b for b, _ in entry["buckets"]]
        counts = [c for _, c in entry["buckets"]]
        assert bounds == sorted(bounds) and bounds[-1] == math.inf
        assert counts == sorted(counts), "buckets are cumulative"
        assert entry["count"] == counts[-1]
    return list(series.values())


# ---- the registry and the format --------------------------------------------------------------


def test_counter_gauge_histogram_render_and_parse_back():
    reg = Registry()
    c = reg.counter("jobs_total", "Jobs done.", ["result"])
    c.labels(result="ok").inc()
    c.labels("ok").inc(2)
    c.labels(result="error").inc()
    g = reg.gauge("queue_depth", "Pods waiting.")
    g.set(5)
    g.dec(2)
    h = reg.histogram("cycle_seconds", "Cycle time.", buckets=[0.1, 1])
    for v in (0.05, 0.1, 0.5, 3.0):
        h.observe(v)
    text = reg.render()
    families = parse_exposition(text)
    assert list(families) == ["jobs_total", "queue_depth", "cycle_seconds"]
    assert families["jobs_total"]["type"] == "counter"
    assert families["jobs_total"]["samples"] == [("jobs_total", {"result": "error"}, 1),
                                                 ("jobs_total", {"result": "ok"}, 3)]
    assert families["queue_depth"]["samples"] == [("queue_depth", {}, 3)]
    [series] = check_histogram(families["cycle_seconds"], "cycle_seconds")
    assert series["buckets"] == [(0.1, 2), (1.0, 3), (math.inf, 4)]  # 0.1 falls in le="0.1"
    assert series["sum"] == pytest.approx(3.65) and series["count"] == 4
    assert 'cycle_seconds_bucket{le="+Inf"} 4\n' in text
    assert "# TYPE cycle_seconds histogram\n" in text


def test_escaping_of_help_and_label_values():
    reg = Registry()
    c = reg.counter("odd_total", 'Help with a \\ backslash\nand a newline "quoted".', ["path"])
    nasty = 'C:\\dir "x"\nnext'
    c.labels(path=nasty).inc()
    text = reg.render()
    assert "# HELP odd_total Help with a \\\\ backslash\\nand a newline \"quoted\".\n" in text
    assert 'odd_total{path="C:\\\\dir \\"x\\"\\nnext"} 1\n' in text
    family = parse_exposition(text)["odd_total"]
    assert family["help"] == 'Help with a \\ backslash\nand a newline "quoted".'
    assert family["samples"] == [("odd_total", {"path": nasty}, 1)]


@settings(max_examples=60, deadline=None)
@given(values=st.dictionaries(st.text(max_size=12), st.integers(0, 10**6), max_size=5),
       observations=st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=30))
def test_any_label_values_and_observations_survive_the_round_trip(values, observations):
    reg = Registry()
    c = reg.counter("x_total", "x", ["k"])
    for label, amount in values.items():
        c.labels(k=label).inc(amount)
    h = reg.histogram("h_seconds", "h", ["k"], buckets=[0.5, 5, 50])
    for v in observations:
        h.labels(k="a").observe(v)
    families = parse_exposition(reg.render())
    assert {labels["k"]: v for _, labels, v in families["x_total"]["samples"]} == values
    if observations:
        [series] = check_histogram(families["h_seconds"], "h_seconds")
        assert series["count"] == len(observations)
        assert series["buckets"][0][1] == sum(1 for v in observations if v <= 0.5)
    else:
        assert families["h_seconds"]["samples"] == []


def test_values_are_formatted_like_the_format_expects():
    reg = Registry()
    g = reg.gauge("g", "g", ["k"])
    g.labels(k="int").set(3)
    g.labels(k="frac").set(0.25)
    g.labels(k="inf").set(math.inf)
    g.labels(k="nan").set(math.nan)
    samples = {labels["k"]: raw for raw, labels in
               ((line.rsplit(" ", 1)[1], _parse_labels(line[1:line.index("}") + 1]))
                for line in reg.render().splitlines() if line.startswith("g{"))}
    assert samples == {"frac": "0.25", "inf": "+Inf", "int": "3", "nan": "NaN"}


def test_nan_observation_lands_in_inf_bucket():
    reg = Registry()
    h = reg.histogram("h", "h", buckets=[1])
    h.observe(math.nan)
    buckets, total, count = h.snapshot()
    assert buckets == [(1.0, 0), (math.inf, 1)] and count == 1 and math.isnan(total)


def test_gauge_function_is_read_at_scrape_time_and_failures_read_nan(caplog):
    reg = Registry()
    age = [10.0]
    g = reg.gauge("age_seconds", "age")
    g.set_function(lambda: age[0])
    age[0] = 42.5
    assert parse_exposition(reg.render())["age_seconds"]["samples"] == [("age_seconds", {}, 42.5)]
    g.set_function(lambda: 1 / 0)
    with caplog.at_level(logging.ERROR):
        [(_, _, value)] = parse_exposition(reg.render())["age_seconds"]["samples"]
    assert math.isnan(value) and "gauge function failed" in caplog.text
    g.set(1)
    assert g.value == 1


def test_registry_returns_the_same_metric_for_the_same_definition_and_refuses_another():
    reg = Registry()
    a = reg.counter("a_total", "A.", ["x"])
    assert reg.counter("a_total", "A.", ["x"]) is a
    with pytest.raises(InputError, match="another definition"):
        reg.counter("a_total", "A.", ["y"])
    with pytest.raises(InputError, match="another definition"):
        reg.gauge("a_total", "A.", ["x"])
    reg.histogram("lat", "L.")
    with pytest.raises(InputError, match="lat_count"):
        reg.counter("lat_count", "clash")
    reg.gauge("b_sum", "B.")
    with pytest.raises(InputError, match="b_sum"):
        reg.histogram("b", "B.")


@pytest.mark.parametrize("call, message", [
    (lambda r: r.counter("bad name", "x"), "metric name"),
    (lambda r: r.counter("ok", "x", ["__reserved"]), "label name"),
    (lambda r: r.counter("ok", "x", ["a", "a"]), "repeat"),
    (lambda r: r.histogram("ok", "x", ["le"]), "'le'"),
    (lambda r: r.histogram("ok", "x", buckets=[1, 1]), "distinct"),
    (lambda r: r.counter("ok", "x", ["a"]).inc(), "use .labels"),
    (lambda r: r.counter("ok", "x", ["a"]).labels("1", "2"), "2 label values"),
    (lambda r: r.counter("ok", "x", ["a"]).labels(b="1"), "do not match"),
    (lambda r: r.counter("ok", "x").inc(-1), "cannot decrease"),
])
def test_misuse_is_an_input_error(call, message):
    with pytest.raises(InputError, match=message):
        call(Registry())


def test_concurrent_increments_are_not_lost():
    reg = Registry()
    c = reg.counter("n_total", "n", ["t"])
    h = reg.histogram("d", "d")

    def work():
        for _ in range(2000):
            c.labels(t="x").inc()
            h.observe(0.01)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.labels(t="x").value == 16000
    assert h.snapshot()[2] == 16000


def test_toposched_metrics_have_the_documented_names_and_register_idempotently():
    reg = Registry()
    m = Metrics.register(reg)
    assert Metrics.register(reg) == m
    m.scheduling_attempts.labels(result="scheduled").inc()
    m.scheduling_duration.observe(0.02)
    m.admission_rejections.labels(reason="TopologyAffinityError").inc()
    m.cache_report_age.set(12)
    m.extender_requests.labels(verb="filter", code="200").inc()
    m.extender_request_duration.labels(verb="filter").observe(0.003)
    m.agent_cgroup_writes.labels(result="written").inc()
    m.nrt_publishes.inc()
    m.controller_nrt_updates.labels(result="updated").inc()
    m.controller_source_reads.labels(result="ok").inc()
    families = parse_exposition(reg.render())
    assert {name: (f["type"], sorted({k for _, labels, _ in f["samples"] for k in labels} - {"le"}))
            for name, f in families.items()} == {
        "toposched_scheduling_attempts_total": ("counter", ["result"]),
        "toposched_scheduling_duration_seconds": ("histogram", []),
        "toposched_admission_rejections_total": ("counter", ["reason"]),
        "toposched_cache_report_age_seconds": ("gauge", []),
        "toposched_extender_requests_total": ("counter", ["code", "verb"]),
        "toposched_extender_request_duration_seconds": ("histogram", ["verb"]),
        "toposched_agent_cgroup_writes_total": ("counter", ["result"]),
        "toposched_nrt_publishes_total": ("counter", []),
        "toposched_controller_nrt_updates_total": ("counter", ["result"]),
        "toposched_controller_source_reads_total": ("counter", ["result"]),
    }
    install = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    for name in families:
        assert name in install, f"{name} is not documented in docs/install.md"


# ---- the ops server -----------------------------------------------------------------------------


def test_ops_server_serves_metrics_health_and_flipping_readiness():
    reg = Registry()
    reg.counter("hits_total", "Hits.").inc(7)
    ready = threading.Event()
    with OpsServer(reg, ready=ready.is_set, host="127.0.0.1", port=0) as server, \
            httpx.Client(base_url=server.url, timeout=5) as http:
        response = http.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"] == CONTENT_TYPE
        assert parse_exposition(response.text)["hits_total"]["samples"] == [("hits_total", {}, 7)]
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 503
        ready.set()
        assert http.get("/readyz").status_code == 200
        ready.clear()
        assert http.get("/readyz").status_code == 503
        assert http.get("/nothing").status_code == 404
        head = http.head("/metrics")
        assert head.status_code == 200 and head.content == b""
        reg.counter("hits_total", "Hits.").inc()
        assert "hits_total 8\n" in http.get("/metrics?x=1").text


def test_a_failing_readiness_check_reads_not_ready():
    def broken() -> bool:
        raise RuntimeError("cache exploded")

    with OpsServer(Registry(), ready=broken, host="127.0.0.1", port=0) as server:
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 503


def test_stopped_server_releases_its_port():
    server = OpsServer(Registry(), ready=lambda: True, host="127.0.0.1", port=0).start()
    port = server.port
    server.stop()
    OpsServer(Registry(), ready=lambda: True, host="127.0.0.1", port=port).stop()


@pytest.mark.parametrize("text, expected", [
    ("0.0.0.0:9090", ("0.0.0.0", 9090)),
    (":8080", ("0.0.0.0", 8080)),
    ("[::]:9091", ("::", 9091)),
    ("127.0.0.1:0", ("127.0.0.1", 0)),
])
def test_listen_addresses(text, expected):
    assert parse_listen_address(text) == expected


@pytest.mark.parametrize("text", ["9090", "host:", "host:99999", "::1:80", "h:8o"])
def test_bad_listen_addresses(text):
    with pytest.raises(InputError, match="address"):
        parse_listen_address(text)


# ---- logging ------------------------------------------------------------------------------------


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_logs_carry_time_level_logger_msg_and_extra_fields(restore_root_logger):
    out = io.StringIO()
    configure_logging("json", "DEBUG", stream=out)
    configure_logging("json", "DEBUG", stream=out)  # replaces, does not double
    logging.getLogger("toposched.test").info("bound %s", "ns/p", extra={"node": "n1", "attempt": 2})
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("toposched.test").exception("failed")
    first, second = [json.loads(line) for line in out.getvalue().splitlines()]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert {k: first[k] for k in ("level", "logger", "msg", "node", "attempt")} == {
        "level": "info", "logger": "toposched.test", "msg": "bound ns/p", "node": "n1", "attempt": 2}
    assert second["level"] == "error" and "ValueError: boom" in second["exc"]


def test_text_logs_and_levels(restore_root_logger):
    out = io.StringIO()
    configure_logging("text", "warning", stream=out)
    log = logging.getLogger("toposched.test")
    log.info("hidden")
    log.warning("shown", extra={"node": "n2"})
    [line] = out.getvalue().splitlines()
    assert line.endswith("WARNING toposched.test: shown node=n2")


@pytest.mark.parametrize("fmt, level, field", [("xml", "INFO", "log-format"), ("json", "LOUD", "log-level")])
def test_bad_logging_settings(fmt, level, field, restore_root_logger):
    with pytest.raises(InputError) as err:
        configure_logging(fmt, level)
    assert err.value.field == field


# ---- shutdown -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_event_is_set_by_the_signal(sig):
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        stop = shutdown_event()
        assert not stop.is_set()
        os.kill(os.getpid(), sig)
        assert stop.wait(2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_freeze_heap_hides_live_objects_from_the_collector_until_unfrozen():
    import gc

    keep = [[i] for i in range(1000)]  # long-lived, like a listed cluster
    try:
        frozen = freeze_heap()
        assert frozen >= len(keep)
        assert gc.get_freeze_count() == frozen
        seen = {id(o) for o in gc.get_objects()}  # the generations a collection walks
        assert not any(id(x) in seen for x in keep)
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
