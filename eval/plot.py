"""The two plots: the report's Pareto plot (accuracy against p50 latency, log x, marker area = file
size) and the frontier's (retention against speed-up over seeds, error bars = sd). In both the
line joins the Pareto points only, in order of speed: nothing another point beats on both axes.
The report's y axis is the task's primary metric: for a token task entity F1 or word accuracy, named so.

Labels are placed greedily (fastest variant first) at the candidate spot that overlaps the
fewest markers and already-placed labels; the legends sit outside the axes so they never hide
a point.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

KIND_STYLE = {  # colour, marker, legend text per runtime kind
    "pytorch": ("#1f77b4", "o", "PyTorch"),
    "onnx": ("#ff7f0e", "s", "ONNX Runtime"),
    "bundle": ("#2ca02c", "D", "edge bundle"),
}
FONT_SIZE = 8.5


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both latency (lower) and accuracy (higher),
    sorted by latency. A point as accurate as a faster one is not on the front."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front, best = [], -math.inf
    for i in order:
        if points[i][1] > best:
            front.append(i)
            best = points[i][1]
    return front


def _marker_area(size_bytes: float | None, largest: float) -> float:
    """Marker area in pt^2: 900 for the largest file, shrinking with log size down to 40 at 1/1000 of it.

    A fixed 1000x range, so two files of similar size get similar markers and a 4x int8 shrink shows.
    """
    if not size_bytes or not largest:
        return 40.0
    t = 1.0 + math.log10(min(size_bytes, largest) / largest) / 3.0
    return 40.0 + max(t, 0.0) * 860.0


def _overlap(a, b) -> float:
    """Overlap area of two boxes (x0, y0, x1, y1)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def place_labels(points_px: list[tuple[float, float]], radii_px: list[float], sizes_px: list[tuple[float, float]],
                 frame_px: tuple[float, float, float, float]) -> list[tuple[float, float, str]]:
    """(dx, dy, ha) in pixels for each label: clear of markers, other labels and the frame where possible."""
    boxes = []
    result: list[tuple[float, float, str] | None] = [None] * len(points_px)
    markers = [(x - r, y - r, x + r, y + r) for (x, y), r in zip(points_px, radii_px)]
    for i in sorted(range(len(points_px)), key=lambda k: points_px[k]):
        (x, y), r, (w, h) = points_px[i], radii_px[i], sizes_px[i]
        gap = r + 5
        candidates = [(gap, 0, "left"), (-gap, 0, "right"), (gap * 0.7, gap * 0.7 + h / 2, "left"),
                      (gap * 0.7, -gap * 0.7 - h / 2, "left"), (-gap * 0.7, gap * 0.7 + h / 2, "right"),
                      (-gap * 0.7, -gap * 0.7 - h / 2, "right"), (gap, 2.2 * h, "left"), (gap, -2.2 * h, "left"),
                      (-gap, 2.2 * h, "right"), (-gap, -2.2 * h, "right"), (gap, 3.6 * h, "left"),
                      (gap, -3.6 * h, "left")]
        best, best_cost = candidates[0], math.inf
        for rank, (dx, dy, ha) in enumerate(candidates):
            x0 = x + dx if ha == "left" else x + dx - w
            box = (x0, y + dy - h / 2, x0 + w, y + dy + h / 2)
            cost = sum(_overlap(box, other) for other in boxes)
            cost += sum(_overlap(box, m) for j, m in enumerate(markers) if j != i)
            outside = (max(0, frame_px[0] - box[0]) + max(0, box[2] - frame_px[2])
                       + max(0, frame_px[1] - box[1]) + max(0, box[3] - frame_px[3]))
            cost += outside * h * 4 + rank * 0.5  # prefer the plain spots when all is equal
            if cost < best_cost:
                best, best_cost, best_box = (dx, dy, ha), cost, box
        boxes.append(best_box)
        result[i] = best
    return result


def pareto_plot(report: dict[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    head = report["headline_case"]
    metric = report["primary_metric"]
    metric_name = report.get("primary_metric_name") or metric  # "entity F1", "word accuracy" for token tasks
    s = report["settings"]
    rows = [r for r in report["variants"]
            if not r["error"] and r["metrics"].get(metric) is not None
            and (r.get("latency_ms") or {}).get(head, {}).get("p50") is not None]
    fig, ax = plt.subplots(figsize=(10.5, 6), dpi=120)
    threads = f"{s['threads']} thread{'s' if s['threads'] != 1 else ''}"
    ax.set_title(f"{report['title']}\n{metric_name} vs p50 latency, batch {head.split('/')[0][1:]}, "
                 f"{'real test lengths' if head.endswith('real') else 'seq len ' + head.split('/s')[-1]}, "
                 f"{threads}, {report['test_rows']['n']} test rows", fontsize=11)
    ax.set_xlabel("p50 latency per batch (ms, log scale)   ← faster")
    ax.set_ylabel(f"{metric_name} on the test rows   (higher is better)")
    if not rows:
        ax.text(0.5, 0.5, "no variant was measured", ha="center", va="center", transform=ax.transAxes)
        fig.savefig(path, format="png")
        plt.close(fig)
        return Path(path)
    xs = [r["latency_ms"][head]["p50"] for r in rows]
    ys = [r["metrics"][metric] for r in rows]
    sizes = [r["size_bytes"] or 0 for r in rows]
    known = [b for b in sizes if b]
    largest = max(known) if known else 0
    areas = [_marker_area(b, largest) for b in sizes]

    ax.set_xscale("log")
    lo, hi = min(xs), max(xs)
    span = max(math.log10(hi / lo), 0.3)
    ax.set_xlim(lo / 10 ** (0.15 * span), hi * 10 ** (0.35 * span))
    ymin, ymax = min(ys), max(ys)
    yspan = max(ymax - ymin, 0.02)
    ax.set_ylim(ymin - 0.15 * yspan, ymax + 0.15 * yspan)

    # The frontier as a staircase through the Pareto points only: anything below-right of it is beaten.
    front = pareto_front(list(zip(xs, ys)))
    fx, fy = [xs[i] for i in front], [ys[i] for i in front]
    ax.plot(fx, fy, drawstyle="steps-post", color="0.35", linestyle="--", linewidth=1.2, zorder=1)
    for i, r in enumerate(rows):
        colour, marker, _ = KIND_STYLE.get(r["kind"], ("0.5", "o", r["kind"]))
        flagged = bool(r["flags"])
        ax.scatter([xs[i]], [ys[i]], s=areas[i], c=colour, marker=marker, alpha=0.75,
                   edgecolors="red" if flagged else "black", linewidths=2.2 if flagged else 0.8, zorder=3)

    ax.grid(True, which="both", alpha=0.25)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())

    # Legends outside the axes, on the right, so no point is hidden.
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    handles = [Line2D([], [], marker=KIND_STYLE.get(k, ("0.5", "o", k))[1], color="none",
                      markerfacecolor=KIND_STYLE.get(k, ("0.5", "o", k))[0], markeredgecolor="black",
                      markersize=9, label=KIND_STYLE.get(k, ("", "", k))[2]) for k in kinds]
    handles.append(Line2D([], [], color="0.35", linestyle="--", label="Pareto frontier"))
    if any(r["flags"] for r in rows):
        handles.append(Line2D([], [], marker="o", color="none", markerfacecolor="white", markeredgecolor="red",
                              markeredgewidth=2, markersize=9, label="flagged (see report)"))
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=FONT_SIZE,
                       title="runtime", title_fontsize=9, frameon=False)
    ax.add_artist(legend)
    if known:
        refs = [largest / 100, largest / 10, largest]
        size_handles = [ax.scatter([], [], s=_marker_area(b, largest), c="0.8", edgecolors="0.3",
                                   label=_human_bytes(b)) for b in refs]
        ax.legend(handles=size_handles, loc="lower left", bbox_to_anchor=(1.02, 0.0), fontsize=FONT_SIZE,
                  title="file size\n(marker area, log)", title_fontsize=9, labelspacing=1.6, borderpad=0.9,
                  handletextpad=1.2, frameon=False)
    fig.tight_layout()

    # Labels: placed in pixel space once the layout is final.
    texts: list[str] = []
    for r in rows:
        text = r["name"] + ("  (baseline)" if r["name"] == report["baseline"] else "")
        speed = (r.get("ratios") or {}).get("speedup")
        if speed is not None and r["name"] != report["baseline"]:
            text += f"  {speed:.1f}x"
        texts.append(text)
    fig.canvas.draw()
    _annotate(fig, ax, xs, ys, [math.sqrt(a) / 2 for a in areas], texts)
    fig.savefig(path, format="png")
    plt.close(fig)
    return Path(path)


def _annotate(fig, ax, xs: list[float], ys: list[float], radii_pt: list[float], texts: list[str]) -> list:
    """Place one label per point (place_labels, in pixels, once the layout is final); the annotations."""
    fig.canvas.draw()
    px_per_pt = fig.dpi / 72.0
    points_px = [tuple(ax.transData.transform((x, y))) for x, y in zip(xs, ys)]
    radii_px = [r * px_per_pt for r in radii_pt]
    sizes_px = [(max(len(line) for line in t.split("\n")) * FONT_SIZE * 0.56 * px_per_pt + 6,
                 FONT_SIZE * 1.5 * px_per_pt * (t.count("\n") + 1)) for t in texts]
    bbox = ax.get_window_extent()
    placements = place_labels(points_px, radii_px, sizes_px, (bbox.x0, bbox.y0, bbox.x1, bbox.y1))
    annotations = []
    for i, (dx, dy, ha) in enumerate(placements):
        annotations.append(ax.annotate(
            texts[i], (xs[i], ys[i]), xytext=(dx / px_per_pt, dy / px_per_pt), textcoords="offset points",
            fontsize=FONT_SIZE, ha=ha, va="center", zorder=4,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.9),
            arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6, shrinkA=0, shrinkB=radii_px[i] / px_per_pt)
            if abs(dy) > sizes_px[i][1] else None))
    return annotations


def short_shape(shape: dict | None, heads: bool = False) -> str:
    """2L/H160, with /F768 only when the FFN is not the usual 4 x hidden (heads: /A6 after the width)."""
    if not shape:
        return "-"
    if "student" in shape:  # a compact student (core/compact): its kind and width
        return f"{shape['student']}/H{shape['hidden_size']}"
    text = f"{shape['layers']}L/H{shape['hidden']}" + (f"/A{shape['heads']}" if heads and "heads" in shape else "")
    return text + (f"/F{shape['intermediate']}" if shape.get("intermediate") not in (None, 4 * shape["hidden"]) else "")


def frontier_points(table: dict) -> list[dict]:
    """The frontier plot's points: {x: speed-up vs the teacher in PyTorch, y: retention %, sd, label,
    student}, the teacher and its int8 export first, then each measured point of the table."""
    t, ti = table["teacher"], table["teacher_int8"]
    points = [{"x": 1.0, "y": 100.0, "sd": 0.0, "label": "teacher (PyTorch fp32)", "student": False},
              {"x": t["p50_ms"] / ti["p50_ms"], "y": 100 * ti["accuracy"] / t["accuracy"], "sd": 0.0,
               "label": "teacher O2+int8", "student": False}]
    for row in table["points"]:
        if not row.get("seeds"):
            continue
        cut = str(row.get("given") or "").startswith("cut-")  # a pruned wide student: its kept heads matter
        target = (f"{row['speedup_target']:g}x: " if row.get("speedup_target") is not None
                  else "cut: " if cut else "")
        points.append({"x": row["speedup_vs_torch"], "y": 100 * row["retention_mean"],
                       "sd": 100 * row["retention_sd"], "label": target + short_shape(row.get("shape"), heads=cut),
                       "student": True})
    return points


def frontier_line(points: list[dict]) -> list[int]:
    """Indices of the Pareto points (no other point is both faster and keeps more), slowest first:
    the points the frontier's line joins, and nothing else."""
    front = pareto_front([(1.0 / p["x"], p["y"]) for p in points])  # speed-up -> a cost, lower is better
    return sorted(front, key=lambda i: points[i]["x"])


def frontier_plot(table: dict, path: str | Path, goal: float | None = 97.0) -> dict:
    """Retention (mean ± sd over seeds) against speed-up, log x; the line joins the Pareto points only,
    labels placed clear of each other. Returns {"front": labels on the line, "labels": their texts,
    "label_boxes": the drawn labels' pixel boxes (x0, y0, x1, y1)}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    points = frontier_points(table)
    front = frontier_line(points)
    xs, ys = [p["x"] for p in points], [p["y"] for p in points]
    fig, ax = plt.subplots(figsize=(9.0, 5.2), dpi=130)
    ax.set_xscale("log")
    lo, hi = min(xs), max(xs)
    span = max(math.log10(hi / lo), 0.3)
    ax.set_xlim(lo / 10 ** (0.12 * span), hi * 10 ** (0.3 * span))
    low = min(p["y"] - p["sd"] for p in points)
    top = max(p["y"] + p["sd"] for p in points)
    ax.set_ylim(low - 0.12 * (top - low + 0.5), top + 0.12 * (top - low + 0.5))
    ax.plot([xs[i] for i in front], [ys[i] for i in front], color="0.35", linestyle="--", linewidth=1.2, zorder=1)
    on_front = set(front)
    for i, p in enumerate(points):
        colour = "#1f77b4" if p["student"] else ("black" if i == 0 else "grey")
        marker = "o" if p["student"] else ("s" if i == 0 else "D")
        ax.errorbar([p["x"]], [p["y"]], yerr=[p["sd"]] if p["sd"] else None, fmt=marker, markersize=7, capsize=3,
                    color=colour, markerfacecolor=colour if i in on_front else "white", markeredgewidth=1.4, zorder=3)
    if goal is not None:
        ax.axhline(goal, color="red", linewidth=0.7, linestyle=":", zorder=0)
    ax.set_xlabel("speed-up vs the teacher in PyTorch fp32 (batch 1, log scale)   faster →")
    ax.set_ylabel("retention of the teacher's test accuracy (%)")
    ax.set_title(f"accuracy-speed frontier: int8 ONNX students, mean ± sd over seeds ({table['test_rows']} test rows)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    handles = [Line2D([], [], marker="o", color="#1f77b4", linestyle="none", label="student on the frontier"),
               Line2D([], [], marker="o", color="#1f77b4", markerfacecolor="white", linestyle="none",
                      label="student beaten by another point"),
               Line2D([], [], marker="s", color="black", linestyle="none", label="teacher PyTorch fp32"),
               Line2D([], [], marker="D", color="grey", linestyle="none", label="teacher O2+int8 ONNX"),
               Line2D([], [], color="0.35", linestyle="--", label="Pareto frontier")]
    if goal is not None:
        handles.append(Line2D([], [], color="red", linestyle=":", label=f"goal {goal:g}%"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=FONT_SIZE, frameon=False)
    fig.tight_layout()
    texts = [p["label"] for p in points]
    annotations = _annotate(fig, ax, xs, ys, [5.0] * len(points), texts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [tuple(a.get_bbox_patch().get_window_extent(renderer).extents) if a.get_bbox_patch() else
             tuple(a.get_window_extent(renderer).extents) for a in annotations]
    fig.savefig(path, format="png")
    plt.close(fig)
    return {"front": [texts[i] for i in front], "labels": texts, "label_boxes": boxes}


def _human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000.0
    return f"{n:.3g} TB"
