"""The simulator's HTML report, drawn from a metrics document.

The fixture below is a small run written out by hand in the shape ``toposched.sim.metrics``
produces (three built-in schedulers and one from a configuration file, time series sampled every
60 s, an FGD-style allocation sweep for two of them, nulls where a figure was not measured).
"""

from __future__ import annotations

import copy
import html
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import matplotlib.image
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.sim.report import PALETTE, REPORT_FILE, render_report, write_report

SAMPLES = 30


def _ramp(peak: float, rise: int, fall: int) -> list[float]:
    """A load that rises to ``peak`` over ``rise`` samples, holds, and falls after ``fall``."""
    return [round(peak * min(1.0, i / rise, max(0.0, (SAMPLES - i) / (SAMPLES - fall))), 6) for i in range(SAMPLES)]


def _timeline(peak_cpu: float, peak_gpu: float, pending_peak: int, rejected_total: int,
              fragmented: float | None = None) -> dict:
    rejected = [min(rejected_total, rejected_total * i // 12) for i in range(SAMPLES)]
    pending = [max(0, pending_peak - abs(i - 10) * pending_peak // 8) for i in range(SAMPLES)]
    cpu = _ramp(peak_cpu, 8, 20)
    timeline = {
        "time": [60.0 * i for i in range(SAMPLES)],
        "cpu": cpu,
        "memory": [round(0.8 * v, 6) for v in cpu],
        "gpu": _ramp(peak_gpu, 6, 22),
        "running": [int(100 * v) for v in cpu],
        "pending": pending,
        "rejected": rejected,
    }
    if fragmented is not None:
        timeline["gpu_fragmentation"] = _ramp(fragmented, 10, 18)
    return timeline


def fixture_document() -> dict:
    """A metrics document of a short burst on 12 nodes (4 GPU nodes), four schedulers."""
    return {
        "scenario": {"name": "burst-12-nodes", "seed": 42, "nodes": 12, "pods": 400, "report_interval": 60.0,
                     "horizon": None, "report_on_events": False, "profiles": "intel-snc x8, gpu-8x x4"},
        "schedulers": {
            "nrt-match": {
                "arrived": 400, "scheduled": 371, "bound": 419, "rejected_admission": 48,
                "rejections": {"TopologyAffinityError": 41, "UnexpectedAdmissionError": 7},
                "recreated": 48, "abandoned": 0, "finished": 300, "running_end": 71, "pending_end": 29,
                "pinned_pods": 240, "aligned_pods": 225, "aligned_fraction": 0.9375,
                "multi_numa_pods": 15, "mean_numa_distance": 13.4, "smt_shared_pods": 3,
                "wait_mean": 41.25, "wait_p95": 300.0,
                "numa_spread": {"1": 225, "2": 15}, "decisions": 912, "scheduler_seconds": 0.8,
                "decisions_per_second": 1140.0, "end_time": 1740.0,
                "timeline": _timeline(0.82, 0.7, 35, 48, 2.5),
                "gpu_fragmentation_mean": 1.375, "gpu_fragmentation": 0.0,
                "gpu_allocation_rate": {"50": 0.5, "100": 0.8811, "130": 0.9012},
                "unallocated_gpus": {"50": 16.0, "100": 3.8, "130": 3.16},
                "fragmented_gpus": {"50": 0.4, "100": 2.1, "130": 2.0},
            },
            "default": {
                "arrived": 400, "scheduled": 352, "bound": 593, "rejected_admission": 241,
                "rejections": {"TopologyAffinityError": 230, "UnexpectedAdmissionError": 11},
                "recreated": 239, "abandoned": 2, "finished": 290, "running_end": 62, "pending_end": 46,
                "pinned_pods": 240, "aligned_pods": 201, "aligned_fraction": 0.8375,
                "multi_numa_pods": 39, "mean_numa_distance": 17.2, "smt_shared_pods": 12,
                "numa_spread": {"1": 201, "2": 31, "4": 8}, "decisions": 1377, "scheduler_seconds": None,
                "decisions_per_second": None, "end_time": 1740.0,
                "timeline": _timeline(0.74, 0.6, 52, 241),
            },
            "toposched": {
                "arrived": 400, "scheduled": 388, "bound": 388, "rejected_admission": 0, "rejections": {},
                "recreated": 0, "abandoned": 0, "finished": 310, "running_end": 78, "pending_end": 12,
                "pinned_pods": 240, "aligned_pods": 240, "aligned_fraction": 1.0,
                "multi_numa_pods": 0, "mean_numa_distance": None, "smt_shared_pods": 0,
                "wait_mean": 12.5, "wait_p95": None,
                "numa_spread": {"1": 240}, "decisions": 702, "scheduler_seconds": 0.6,
                "decisions_per_second": 1170.0, "end_time": 1740.0,
                "timeline": _timeline(0.9, 0.8, 20, 0, 0.75),
                "gpu_fragmentation_mean": 0.4125, "gpu_fragmentation": 0.0,
                "gpu_allocation_rate": {"50": 0.5, "100": 0.9523, "130": 0.9688},
                "unallocated_gpus": {"50": 16.0, "100": 1.53, "130": 1.0},
                "fragmented_gpus": {"50": 0.1, "100": 0.6, "130": 0.55},
            },
            "kube-config-binpack": {
                "arrived": 400, "scheduled": 360, "bound": 470, "rejected_admission": 110,
                "rejections": {"TopologyAffinityError": 110},
                "recreated": 110, "abandoned": 0, "finished": 295, "running_end": 65, "pending_end": 40,
                "pinned_pods": 240, "aligned_pods": 219, "aligned_fraction": 0.9125,
                "multi_numa_pods": 21, "mean_numa_distance": 15.05, "smt_shared_pods": 5,
                "numa_spread": {"1": 219, "2": 21}, "decisions": 1002, "scheduler_seconds": 2.0,
                "decisions_per_second": 501.0, "end_time": 1740.0,
                "timeline": _timeline(0.8, 0.65, 40, 110),
            },
        },
    }


ORDER = ["toposched", "default", "kube-config-binpack", "nrt-match"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    return write_report(fixture_document(), tmp_path_factory.mktemp("report") / "nested" / "out")


@pytest.fixture(scope="module")
def page(report) -> str:
    return report.read_text(encoding="utf-8")


def _table_cells(page: str) -> dict[str, list[str]]:
    """Row label -> its cells, read back from the comparison table."""
    table = page[page.index('<table class="compare">'):page.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL):
        label = re.search(r"<th[^>]*>(.*?)</th>", row, re.DOTALL).group(1)
        rows[html.unescape(label)] = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row, re.DOTALL)]
    return rows


def test_the_page_is_written_where_asked(report, tmp_path):
    assert report.name == REPORT_FILE
    assert report.parent.name == "out" and report.parent.parent.name == "nested"
    again = write_report({"schedulers": {"toposched": {"scheduled": 1}}}, tmp_path)
    assert again == tmp_path / REPORT_FILE


def test_the_table_holds_every_scheduler_and_figure_in_a_stable_order(page):
    rows = _table_cells(page)
    header = re.findall(r'<th scope="col" style="[^"]*">(.*?)</th>', page)
    assert header == ORDER  # toposched first, then the others by name
    doc = fixture_document()["schedulers"]
    runs = [doc[name] for name in ORDER]
    assert rows["pods arrived"] == [str(r["arrived"]) for r in runs]
    assert rows["scheduled (started on a node)"] == ["388", "352", "360", "371"]
    assert rows["rejected at admission"] == ["0", "241", "110", "48"]
    assert rows["NUMA alignment impossible (TopologyAffinityError)"] == ["0", "230", "110", "41"]
    assert rows["aligned memory or devices not allocatable (UnexpectedAdmissionError)"] == ["0", "11", "0", "7"]
    assert rows["re-created after a rejection"] == ["0", "239", "110", "48"]
    assert rows["pending at the end"] == ["12", "46", "40", "29"]
    assert rows["wait from arrival to start: mean, 95th percentile"] == ["12.5 s", "—", "—", "41.2 s, 300 s"]
    assert rows["aligned to the fewest NUMA nodes"] == [
        "100.0 % (240 of 240)", "83.8 % (201 of 240)", "91.2 % (219 of 240)", "93.8 % (225 of 240)"]
    assert rows["mean NUMA distance of multi-NUMA pods"] == ["—", "17.20 (39 pods)", "15.05 (21 pods)",
                                                               "13.40 (15 pods)"]
    assert rows["pods sharing a core with another pod"] == ["0", "12", "5", "3"]
    assert rows["fragmented idle GPUs, mean over time"] == ["0.41", "—", "—", "1.38"]
    assert rows["fragmented idle GPUs at the end"] == ["0.00", "—", "—", "0.00"]
    assert rows["scheduler decisions per second (wall clock)"] == ["1170", "—", "501", "1140"]
    assert list(rows).index("scheduler decisions per second (wall clock)") == len(rows) - 1


def test_the_scenario_is_summarised(page):
    facts = {html.unescape(k): html.unescape(v) for k, v in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page)}
    assert facts == {"scenario": "burst-12-nodes", "seed": "42", "nodes": "12", "pods": "400",
                     "report interval (s)": "60", "horizon": "—", "profiles": "intel-snc x8, gpu-8x x4",
                     "report on events": "no"}
    assert "<title>toposched simulation: burst-12-nodes</title>" in page
    assert "How to read this." in page


def test_every_plot_is_inline_svg(page):
    plots = re.findall(r'<figure id="([^"]+)">\s*<svg class="plot"', page)
    assert plots == ["plot-allocation", "plot-rejected", "plot-pending", "plot-gpu-fragmentation", "plot-numa-spread",
                     "plot-gpu-allocation"]
    # matplotlib leaves each text as a comment beside its glyph paths: the panels drawn
    for title in ("CPU allocated", "memory allocated", "GPU allocated", "rejected pods (cumulative)",
                  "pending pods", "fragmented idle GPUs", "GPU allocation rate (%)", "unallocated GPUs"):
        assert f"<!-- {title} -->" in page
    for name in ORDER:
        assert f"<!-- {name} -->" in page  # in the legends


def test_the_same_document_gives_the_same_bytes(report, tmp_path):
    doc = fixture_document()
    # Insertion order of the input and matplotlib's global settings change nothing.
    shuffled = {"schedulers": dict(reversed(list(doc["schedulers"].items()))),
                "scenario": dict(reversed(list(doc["scenario"].items())))}
    for run in shuffled["schedulers"].values():
        run["timeline"] = dict(reversed(list(run["timeline"].items())))
        if "gpu_allocation_rate" in run:
            run["gpu_allocation_rate"] = dict(reversed(list(run["gpu_allocation_rate"].items())))
    with matplotlib.rc_context({"lines.linewidth": 7.0, "font.size": 20.0, "svg.hashsalt": None}):
        second = write_report(shuffled, tmp_path)
        assert matplotlib.rcParams["lines.linewidth"] == 7.0  # the caller's settings are left alone
    assert second.read_bytes() == report.read_bytes()


def test_nothing_is_loaded_and_nothing_runs(page):
    assert "<script" not in page.lower()
    assert not re.search(r"<[^>]+\son[a-z]+=", page)  # no event handler attributes
    for match in re.finditer(r"https?://", page):
        before = page[max(0, match.start() - 20):match.start()]
        assert re.search(r'xmlns(:\w+)?="$', before), page[match.start() - 40:match.start() + 60]
    assert not re.search(r"""(src|href)=["'](?!#)""", page)  # links only to ids within the page
    assert "@import" not in page and "url(" not in page.replace("url(#", "")


def test_ids_are_unique_and_every_reference_resolves(page):
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    references = set(re.findall(r'(?:xlink:href="#|url\(#)([^")]+)', page))
    assert references and references <= set(ids)


class _TagBalance(HTMLParser):
    VOID = frozenset({"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "wbr", "source"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def test_the_html_is_well_formed(page):
    assert page.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    parser = _TagBalance()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == []


def test_nulls_and_missing_figures_render_as_a_dash():
    doc = {"scenario": {"name": "sparse", "seed": None},
           "schedulers": {"default": {"scheduled": 3, "aligned_fraction": None}, "toposched": {"scheduled": 4}}}
    page = render_report(doc)
    rows = _table_cells(page)
    assert rows["scheduled (started on a node)"] == ["4", "3"]
    assert rows["aligned to the fewest NUMA nodes"] == ["—", "—"]
    assert rows["scheduler decisions per second (wall clock)"] == ["—", "—"]
    assert "fragmented idle GPUs, mean over time" not in rows  # no scheduler measured it
    assert "<dt>seed</dt><dd>—</dd>" in page
    assert "<svg" not in page and 'id="plots"' not in page  # no series, no plots section


def test_plots_appear_only_for_what_the_document_holds():
    doc = fixture_document()
    for run in doc["schedulers"].values():
        run.pop("gpu_allocation_rate", None)
        run.pop("unallocated_gpus", None)
        run.pop("fragmented_gpus", None)
        run.pop("numa_spread")
        run["timeline"].pop("gpu_fragmentation", None)
        run["timeline"]["gpu"] = [0.0] * SAMPLES
    page = render_report(doc)
    assert re.findall(r'<figure id="([^"]+)">', page) == ["plot-allocation", "plot-rejected", "plot-pending"]
    assert "<!-- CPU allocated -->" in page and "<!-- GPU allocated -->" not in page


def test_scheduler_names_are_escaped():
    page = render_report({"schedulers": {"<b>&co": {"scheduled": 1}}})
    assert "&lt;b&gt;&amp;co" in page and "<b>&co" not in page


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.sampled_from(["toposched", "default", "nrt-match", "a-custom", "Zeta", "b"]),
                       st.integers(min_value=0, max_value=10**6), min_size=1))
def test_order_is_toposched_then_by_name_and_every_count_is_shown(scheduled):
    page = render_report({"schedulers": {name: {"scheduled": n} for name, n in scheduled.items()}})
    header = re.findall(r'<th scope="col" style="[^"]*">(.*?)</th>', page)
    others = sorted(n for n in scheduled if n != "toposched")
    assert header == (["toposched"] if "toposched" in scheduled else []) + others
    assert _table_cells(page)["scheduled (started on a node)"] == [str(scheduled[n]) for n in header]


def _broken(path: tuple, value) -> dict:
    doc = copy.deepcopy(fixture_document())
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "field"), [
    (("schedulers",), KeyError, "schedulers"),
    (("schedulers",), [], "schedulers"),
    (("schedulers",), {}, "schedulers"),
    (("scenario",), "a string", "scenario"),
    (("schedulers", "default"), 3, "schedulers.default"),
    (("schedulers", "default", "scheduled"), "many", "schedulers.default.scheduled"),
    (("schedulers", "default", "aligned_fraction"), float("nan"), "schedulers.default.aligned_fraction"),
    (("schedulers", "default", "rejections"), {"TopologyAffinityError": -1},
     "schedulers.default.rejections.TopologyAffinityError"),
    (("schedulers", "default", "numa_spread"), {"two": 3}, "schedulers.default.numa_spread"),
    (("schedulers", "default", "timeline", "pending"), [1, 2], "schedulers.default.timeline.pending"),
    (("schedulers", "default", "timeline", "time"), KeyError, "schedulers.default.timeline.time"),
    (("schedulers", "default", "timeline", "time"), 60, "schedulers.default.timeline.time"),
    (("schedulers", "default", "timeline", "cpu"), [0.5, "high"] + [0.5] * (SAMPLES - 2),
     "schedulers.default.timeline.cpu"),
    (("schedulers", "toposched", "gpu_allocation_rate"), {"full": 0.9}, "schedulers.toposched.gpu_allocation_rate"),
    (("schedulers", "toposched", "unallocated_gpus", "100"), "1.5", "schedulers.toposched.unallocated_gpus.100"),
    (("schedulers", "toposched", "fragmented_gpus", "130"), [], "schedulers.toposched.fragmented_gpus.130"),
    (("schedulers", "toposched", "gpu_fragmentation_mean"), "low", "schedulers.toposched.gpu_fragmentation_mean"),
    (("schedulers", "toposched", "timeline", "gpu_fragmentation"), [0.1] * (SAMPLES - 1),
     "schedulers.toposched.timeline.gpu_fragmentation"),
])
def test_a_malformed_document_names_the_field(path, value, field):
    with pytest.raises(InputError) as err:
        render_report(_broken(path, value), source="run/metrics.json")
    assert err.value.field == field
    assert err.value.source == "run/metrics.json"
    assert str(err.value).startswith(f"run/metrics.json: {field}: ")


def test_a_document_that_is_not_a_mapping_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        write_report(["schedulers"], tmp_path)
    assert err.value.source == "metrics document"
    assert not (tmp_path / REPORT_FILE).exists()


def test_headless_chromium_renders_the_page_and_its_plots(report, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (Debian package `chromium`; scripts/test.sh installs it as root)")
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2400",
         report.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1280)
    ink = np.any(pixels < 0.9, axis=-1)
    assert ink.mean() > 0.03  # text, table and plots, not a blank page
    # Saturated colours come only from the plots' lines (and the thin rules over the table's
    # columns, a few hundred pixels each): each of the first schedulers' colours must show at length.
    for color in PALETTE[:3]:
        rgb = np.array([int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        near = np.all(np.abs(pixels - rgb) < 0.08, axis=-1)
        assert near.sum() > 2000, f"{color}: {near.sum()} pixels"
