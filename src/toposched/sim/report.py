"""The simulator's HTML report: one self-contained page comparing the schedulers of one run.

The page is built from the metrics document alone (``metrics.json``: ``scenario`` and one
object per scheduler under ``schedulers``, see docs/sim/report.md), so a report can be redrawn
from a saved document. Plots are drawn by matplotlib as SVG and written into the page; the page
has no script and loads nothing. The same document always gives the same bytes: matplotlib runs
on its built-in defaults plus fixed settings, SVG ids are salted and prefixed per figure,
metadata with dates is left out, and every collection is walked in sorted order.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources as package_files
from pathlib import Path
from typing import Any

import jinja2
import matplotlib
from markupsafe import Markup, escape
from matplotlib.figure import Figure

from toposched.errors import InputError
from toposched.sim.metrics import reason_label

__all__ = ["REPORT_FILE", "render_report", "write_report"]

REPORT_FILE = "report.html"
TEMPLATE = "data/sim/report.html.j2"
DEFAULT_SOURCE = "metrics document"
FIRST_SCHEDULER = "toposched"
NULL = "—"

# Matplotlib's tab10 colours, assigned to schedulers by their place in the report's order, so a
# scheduler keeps its colour in every plot.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINE_STYLES = ("-", "--", "-.", ":")

# Applied on top of matplotlib's built-in defaults, so no matplotlibrc or style changes a byte.
_STYLE = {
    "svg.hashsalt": "toposched-report",
    "svg.fonttype": "path",  # glyphs as paths: no font has to exist where the page is opened
    "font.family": "DejaVu Sans",  # shipped with matplotlib
    "font.size": 9.0,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "figure.dpi": 100.0,
    "savefig.bbox": None,
    "path.simplify": True,
}
# All keys None: matplotlib then writes no <metadata> (no date, no version, no http URIs).
_SVG_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}

# The figures of a scheduler's object the table shows (each a number or null when present).
_TABLE_FIGURES = ("arrived", "scheduled", "rejected_admission", "recreated", "pending_end", "aligned_fraction",
                  "aligned_pods", "pinned_pods", "mean_numa_distance", "multi_numa_pods", "smt_shared_pods",
                  "wait_mean", "wait_p95", "gpu_fragmentation_mean", "gpu_fragmentation", "decisions_per_second")

# The timeline's resource series, in plot order, with their titles.
_RESOURCES = (("cpu", "CPU"), ("memory", "memory"), ("gpu", "GPU"))


@dataclass(frozen=True)
class _Run:
    """One scheduler's figures, checked."""

    name: str
    rank: int  # place in the report's order
    color: str
    style: str
    values: Mapping[str, Any]
    rejections: dict[str, int] | None
    timeline: dict[str, list[float]] | None
    numa_spread: dict[int, int] | None
    gpu_allocation_rate: list[tuple[float, float | None]] | None
    unallocated_gpus: list[tuple[float, float | None]] | None
    fragmented_gpus: list[tuple[float, float | None]] | None


@dataclass(frozen=True)
class _Row:
    label: str
    cells: tuple[str, ...]
    detail: bool = False  # a sub-row (one rejection reason) under the row before it


@dataclass(frozen=True)
class _Plot:
    id: str
    title: str
    caption: str
    svg: Markup


def write_report(metrics: Mapping[str, Any], directory: Path, *, source: str = DEFAULT_SOURCE) -> Path:
    """Write ``report.html`` for this metrics document into ``directory`` (created if needed).

    Returns the path of the page. The same document always gives byte-identical HTML. Raises
    :class:`InputError` naming ``source`` and the field when the document is malformed.
    """
    page = render_report(metrics, source=source)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / REPORT_FILE
    path.write_text(page, encoding="utf-8")
    return path


def render_report(metrics: Mapping[str, Any], *, source: str = DEFAULT_SOURCE) -> str:
    """The report page for this metrics document, as text (what :func:`write_report` writes)."""
    if not isinstance(metrics, Mapping):
        raise InputError("the metrics document must be a mapping", source=source)
    scenario = metrics.get("scenario", {})
    if not isinstance(scenario, Mapping):
        raise InputError("must be a mapping of facts about the run", field="scenario", source=source)
    runs = _runs(metrics, source)
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                  trim_blocks=True, lstrip_blocks=True).from_string(_template_text())
    name = scenario.get("name")
    return template.render(
        title=f"toposched simulation: {name}" if name not in (None, "") else "toposched simulation",
        facts=_facts(scenario),
        schedulers=[r.name for r in runs],
        colors=[r.color for r in runs],
        rows=_rows(runs),
        plots=_plots(runs),
    )


def _template_text() -> str:
    return (package_files.files("toposched") / TEMPLATE).read_text(encoding="utf-8")


# ---- reading the document -------------------------------------------------------------------------


def _ordered(names: Sequence[str]) -> list[str]:
    """toposched first when present, then the others by name."""
    return sorted(names, key=lambda n: (n != FIRST_SCHEDULER, n))


def _runs(metrics: Mapping[str, Any], source: str) -> list[_Run]:
    if "schedulers" not in metrics:
        raise InputError("missing: the document must hold one object per scheduler", field="schedulers", source=source)
    schedulers = metrics["schedulers"]
    if not isinstance(schedulers, Mapping) or not schedulers:
        raise InputError("must be a non-empty mapping of scheduler name to its metrics", field="schedulers",
                         source=source)
    for name in schedulers:
        if not isinstance(name, str) or not name:
            raise InputError(f"scheduler names must be non-empty strings, not {name!r}", field="schedulers",
                             source=source)
    runs = []
    for index, name in enumerate(_ordered(list(schedulers))):
        where = f"schedulers.{name}"
        values = schedulers[name]
        if not isinstance(values, Mapping):
            raise InputError("must be a mapping of metric name to value", field=where, source=source)
        for key in _TABLE_FIGURES:
            value = values.get(key)
            if value is not None and not _is_number(value):
                raise InputError(f"{value!r} is not a number or null", field=f"{where}.{key}", source=source)
        runs.append(_Run(
            name=name,
            rank=index,
            color=PALETTE[index % len(PALETTE)],
            style=LINE_STYLES[index // len(PALETTE) % len(LINE_STYLES)],
            values=values,
            rejections=_counts(values.get("rejections"), f"{where}.rejections", source),
            timeline=_timeline(values.get("timeline"), f"{where}.timeline", source),
            numa_spread=_spread(values.get("numa_spread"), f"{where}.numa_spread", source),
            gpu_allocation_rate=_by_load(values.get("gpu_allocation_rate"), f"{where}.gpu_allocation_rate", source),
            unallocated_gpus=_by_load(values.get("unallocated_gpus"), f"{where}.unallocated_gpus", source),
            fragmented_gpus=_by_load(values.get("fragmented_gpus"), f"{where}.fragmented_gpus", source),
        ))
    return runs


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: Any, field: str, source: str) -> Mapping[Any, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError("must be an object", field=field, source=source)
    return value


def _counts(value: Any, field: str, source: str) -> dict[str, int] | None:
    mapping = _mapping(value, field, source)
    if mapping is None:
        return None
    for key, count in mapping.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InputError(f"{count!r} is not a count", field=f"{field}.{key}", source=source)
    return {str(k): mapping[k] for k in sorted(mapping, key=str)}


def _spread(value: Any, field: str, source: str) -> dict[int, int] | None:
    counts = _counts(value, field, source)
    if counts is None:
        return None
    spread = {}
    for key, count in counts.items():
        if not key.isdigit() or int(key) < 1:
            raise InputError(f"{key!r} is not a number of NUMA nodes", field=field, source=source)
        spread[int(key)] = count
    return dict(sorted(spread.items()))


def _by_load(value: Any, field: str, source: str) -> list[tuple[float, float | None]] | None:
    """A map from arrived-load percent (a string such as ``"100"``) to a figure, sorted by load."""
    mapping = _mapping(value, field, source)
    if mapping is None:
        return None
    points = []
    for key, figure in mapping.items():
        try:
            load = float(key)
        except (TypeError, ValueError):
            load = math.nan
        if not math.isfinite(load):
            raise InputError(f"{key!r} is not an arrived-load percent", field=field, source=source)
        if figure is not None and not _is_number(figure):
            raise InputError(f"{figure!r} is not a number", field=f"{field}.{key}", source=source)
        points.append((load, figure))
    return sorted(points, key=lambda p: p[0])


def _timeline(value: Any, field: str, source: str) -> dict[str, list[float]] | None:
    """The time series: ``time`` and equally long series; nulls become NaN (a gap in the plot)."""
    mapping = _mapping(value, field, source)
    if mapping is None:
        return None
    if "time" not in mapping:
        raise InputError("missing: the sample times", field=f"{field}.time", source=source)
    series = {}
    for key in ["time", *sorted((k for k in mapping if k != "time"), key=str)]:
        points = mapping[key]
        if not isinstance(points, Sequence) or isinstance(points, str):
            raise InputError("must be a list of numbers", field=f"{field}.{key}", source=source)
        if len(points) != len(mapping["time"]):
            raise InputError(f"has {len(points)} samples but time has {len(mapping['time'])}",
                             field=f"{field}.{key}", source=source)
        for point in points:
            if point is not None and not _is_number(point):
                raise InputError(f"{point!r} is not a number", field=f"{field}.{key}", source=source)
        series[str(key)] = [math.nan if p is None else float(p) for p in points]
    return series


# ---- the summary and the table ----------------------------------------------------------------------

_FACT_LABELS = {"name": "scenario", "seed": "seed", "nodes": "nodes", "pods": "pods",
                "report_interval": "report interval (s)"}


def _fact(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def _facts(scenario: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The scenario's facts: the well-known ones first, then the others by name."""
    known = [(label, _fact(scenario[key])) for key, label in _FACT_LABELS.items() if key in scenario]
    others = [(str(key).replace("_", " "), _fact(scenario[key]))
              for key in sorted(scenario, key=str) if key not in _FACT_LABELS]
    return known + others


def _count(value: Any) -> str:
    if value is None:
        return NULL
    return str(value) if isinstance(value, int) else f"{value:g}"


def _share(value: Any, part: Any, whole: Any) -> str:
    if value is None:
        return NULL
    text = f"{100 * value:.1f} %"
    return f"{text} ({_count(part)} of {_count(whole)})" if part is not None and whole is not None else text


def _distance(value: Any, pods: Any) -> str:
    if value is None:
        return NULL
    return f"{value:.2f} ({_count(pods)} pods)" if pods is not None else f"{value:.2f}"


def _waits(mean: Any, p95: Any) -> str:
    if mean is None:
        return NULL
    return f"{mean:.1f} s, {p95:.0f} s" if p95 is not None else f"{mean:.1f} s"


def _gpus(value: Any) -> str:
    return NULL if value is None else f"{value:.2f}"


def _rate(value: Any) -> str:
    if value is None:
        return NULL
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _rows(runs: list[_Run]) -> list[_Row]:
    def row(label: str, cell) -> _Row:
        return _Row(label, tuple(cell(r.values) for r in runs))

    rows = [
        row("pods arrived", lambda v: _count(v.get("arrived"))),
        row("scheduled (started on a node)", lambda v: _count(v.get("scheduled"))),
        row("rejected at admission", lambda v: _count(v.get("rejected_admission"))),
    ]
    reasons = sorted({reason for r in runs for reason in (r.rejections or {})})
    for reason in reasons:
        rows.append(_Row(reason_label(reason), tuple(NULL if r.rejections is None else str(r.rejections.get(reason, 0))
                                                     for r in runs), detail=True))
    rows += [
        row("re-created after a rejection", lambda v: _count(v.get("recreated"))),
        row("pending at the end", lambda v: _count(v.get("pending_end"))),
        row("wait from arrival to start: mean, 95th percentile", lambda v: _waits(v.get("wait_mean"),
                                                                                   v.get("wait_p95"))),
        row("aligned to the fewest NUMA nodes", lambda v: _share(v.get("aligned_fraction"), v.get("aligned_pods"),
                                                                 v.get("pinned_pods"))),
        row("mean NUMA distance of multi-NUMA pods", lambda v: _distance(v.get("mean_numa_distance"),
                                                                          v.get("multi_numa_pods"))),
        row("pods sharing a core with another pod", lambda v: _count(v.get("smt_shared_pods"))),
    ]
    for key, label in (("gpu_fragmentation_mean", "fragmented idle GPUs, mean over time"),
                       ("gpu_fragmentation", "fragmented idle GPUs at the end")):
        if any(r.values.get(key) is not None for r in runs):
            rows.append(row(label, lambda v, key=key: _gpus(v.get(key))))
    rows.append(row("scheduler decisions per second (wall clock)", lambda v: _rate(v.get("decisions_per_second"))))
    return rows


# ---- plots ------------------------------------------------------------------------------------------


def _plots(runs: list[_Run]) -> list[_Plot]:
    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update(_STYLE)
        drawn = [
            _allocation_plot(runs),
            _timeline_plot(runs, "rejected", "Admission rejections over time",
                           "Pods the nodes refused so far (cumulative). A flat line at zero is what you want: "
                           "every rejection is a pod the scheduler sent to a node that could not run it.",
                           "rejected pods (cumulative)"),
            _timeline_plot(runs, "pending", "Pending pods over time",
                           "Pods waiting for a node at each sample. Pods wait when no node has room for them; "
                           "re-created pods wait out their controller's backoff first.",
                           "pending pods"),
            _timeline_plot(runs, "gpu_fragmentation", "GPU fragmentation over time",
                           "Idle GPU capacity, in GPUs, that the workload's GPU pods could not use where it sits (the "
                           "FGD paper's measure: a GPU pod cannot use a node's idle GPUs when it does not fit there, "
                           "nor the part of them on GPUs with less free than it asks). Lower is better packing.",
                           "fragmented idle GPUs", name="gpu-fragmentation"),
            _spread_plot(runs),
            _gpu_plot(runs),
        ]
    return [p for p in drawn if p is not None]


def _time_unit(runs: list[_Run]) -> tuple[float, str]:
    end = max((t for r in runs if r.timeline for t in r.timeline["time"] if not math.isnan(t)), default=0.0)
    if end > 3 * 3600:
        return 3600.0, "hours"
    if end > 600:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _line(ax, run: _Run, x: list[float], y: list[float], **kwargs: Any) -> None:
    # Earlier schedulers in the report's order are drawn on top (toposched's line at zero stays
    # visible), and lines are not clipped at the axes so a line along an axis still shows.
    ax.plot(x, y, color=run.color, linestyle=run.style, linewidth=1.4, label=run.name,
            zorder=3 + 1 / (2 + run.rank), clip_on=False, **kwargs)


def _allocation_plot(runs: list[_Run]) -> _Plot | None:
    timed = [r for r in runs if r.timeline]
    resources = [(key, title) for key, title in _RESOURCES
                 if any(v > 0 for r in timed for v in r.timeline.get(key, ()) if not math.isnan(v))]
    if not resources:
        return None
    scale, unit = _time_unit(runs)
    figure = _figure(3.6 * len(resources) + 0.6)
    axes = figure.subplots(1, len(resources), sharey=True, squeeze=False)[0]
    for ax, (key, title) in zip(axes, resources):
        for run in timed:
            if key in run.timeline:
                _line(ax, run, [t / scale for t in run.timeline["time"]], [100 * v for v in run.timeline[key]])
        ax.set_title(f"{title} allocated")
        ax.set_xlabel(f"simulated time ({unit})")
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("% of cluster allocatable")
    _legend(figure, axes[0])
    return _plot(figure, "allocation", "Allocation over time",
                 "Share of the cluster's allocatable CPU, memory and GPUs held by running pods. A scheduler that "
                 "packs well keeps more of the cluster busy under the same load.")


def _timeline_plot(runs: list[_Run], key: str, title: str, caption: str, ylabel: str,
                   name: str | None = None) -> _Plot | None:
    timed = [r for r in runs if r.timeline and key in r.timeline]
    if not timed:
        return None
    scale, unit = _time_unit(runs)
    figure = _figure(8.0)
    ax = figure.subplots()
    for run in timed:
        _line(ax, run, [t / scale for t in run.timeline["time"]], run.timeline[key], drawstyle="steps-post")
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    _legend(figure, ax)
    return _plot(figure, name or key, title, caption)


def _spread_plot(runs: list[_Run]) -> _Plot | None:
    counted = [r for r in runs if r.numa_spread]
    if not counted:
        return None
    sizes = sorted({size for r in counted for size in r.numa_spread})
    width = 0.8 / len(counted)
    figure = _figure(8.0)
    ax = figure.subplots()
    for index, run in enumerate(counted):
        offset = (index - (len(counted) - 1) / 2) * width
        ax.bar([i + offset for i in range(len(sizes))], [run.numa_spread.get(s, 0) for s in sizes],
               width=width, color=run.color, label=run.name)
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_xlabel("NUMA nodes a pod's pinned resources come from")
    ax.set_ylabel("pods")
    ax.grid(axis="x", visible=False)
    _legend(figure, ax)
    return _plot(figure, "numa-spread", "NUMA spread of pinned pods",
                 "Pods with exclusive CPUs, memory or devices, by how many NUMA nodes those come from. One NUMA "
                 "node is local memory and devices; more means remote accesses.")


def _gpu_plot(runs: list[_Run]) -> _Plot | None:
    panels = [(attr, label) for attr, label in (("gpu_allocation_rate", "GPU allocation rate (%)"),
                                                ("unallocated_gpus", "unallocated GPUs"),
                                                ("fragmented_gpus", "fragmented idle GPUs"))
              if any(getattr(r, attr) for r in runs)]
    if not panels:
        return None
    figure = _figure(4.2 * len(panels) + 0.6)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (attr, label) in zip(axes, panels):
        scale = 100.0 if attr == "gpu_allocation_rate" else 1.0
        for run in runs:
            points = getattr(run, attr)
            if points:
                _line(ax, run, [load for load, _ in points],
                      [math.nan if v is None else scale * v for _, v in points], marker="o", markersize=3)
        ax.set_xlabel("arrived GPU load (% of cluster GPUs)")
        ax.set_ylabel(label)
        ax.set_ylim(0, 105 if attr == "gpu_allocation_rate" else None)
    _legend(figure, axes[0])
    return _plot(figure, "gpu-allocation", "GPU allocation vs arrived load",
                 "Pods arrive and never leave until their GPU requests reach the given share of the cluster's "
                 "GPUs (the FGD experiment). Higher allocation and fewer unallocated and fragmented GPUs mean "
                 "better packing.")


def _figure(width: float) -> Figure:
    return Figure(figsize=(width, 3.0), layout="constrained")


def _legend(figure: Figure, ax) -> None:
    """One legend per figure, below the plots: the schedulers, in the report's order."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5))


def _plot(figure: Figure, name: str, title: str, caption: str) -> _Plot:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata=_SVG_METADATA)
    return _Plot(f"plot-{name}", title, caption, _inline_svg(buffer.getvalue(), f"plot-{name}", title))


_SVG_START = re.compile(r"<svg\b")
_SVG_STYLE = re.compile(r"\s*<style type=\"text/css\">.*?</style>", re.DOTALL)
_SVG_ID = re.compile(r'\bid="([^"]+)"')
_SVG_REF = re.compile(r'(xlink:href="#|url\(#)')


def _inline_svg(svg: str, prefix: str, label: str) -> Markup:
    """Matplotlib's SVG file as an element of the page.

    The XML prolog and doctype go (the doctype names an external DTD), the document-wide
    ``*{...}`` style moves into the page's CSS scoped to plots, and every id gets the figure's
    prefix: ids live in one namespace per page, and matplotlib numbers them per figure.
    """
    match = _SVG_START.search(svg)
    if match is None:
        raise AssertionError("matplotlib wrote no <svg> element")
    svg = _SVG_STYLE.sub("", svg[match.start():]).strip()
    svg = _SVG_ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _SVG_REF.sub(lambda m: f"{m.group(1)}{prefix}-", svg)
    svg = svg.replace("<svg ", f'<svg class="plot" role="img" aria-label="{escape(label)}" ', 1)
    return Markup(svg)
