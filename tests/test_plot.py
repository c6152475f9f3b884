"""eval/plot.py's frontier plot: the line joins the Pareto points only; labels do not overlap
(on a table `shrinkbert frontier` wrote, tests/data/frontier_table.md, read by bench/frontier_plot.py)."""
from pathlib import Path

from fixtures import load_bench

ROOT = Path(__file__).resolve().parents[1]


def test_the_line_joins_only_points_nothing_beats_slowest_first():
    from shrinkbert.eval.plot import frontier_line

    points = [{"x": 1.0, "y": 100.0}, {"x": 12.0, "y": 93.8}, {"x": 5.4, "y": 98.8}, {"x": 17.1, "y": 94.2},
              {"x": 16.4, "y": 93.8}, {"x": 28.2, "y": 93.6}, {"x": 17.1, "y": 94.0}]
    # 12x/93.8 and 16.4x/93.8 are beaten by 17.1x/94.2; 17.1x/94.0 ties its speed with less retention
    assert frontier_line(points) == [0, 2, 3, 5]


def test_the_frontier_plot_of_a_written_table_has_clear_labels(tmp_path):
    from shrinkbert.eval.plot import frontier_plot

    table = load_bench("frontier_plot").table_from_markdown((ROOT / "tests" / "data" / "frontier_table.md").read_text())
    assert table["test_rows"] == 1007 and len(table["points"]) == 7
    drawn = frontier_plot(table, tmp_path / "frontier.png")
    assert (tmp_path / "frontier.png").stat().st_size > 10_000
    assert drawn["front"] == ["teacher (PyTorch fp32)", "teacher O2+int8", "3L/H384/F768", "5x: 2L/H384",
                              "15x: 1L/H288", "2L/H160", "25x: 1L/H192"]
    assert "8x: 1L/H384" in drawn["labels"] and "3L/H128" in drawn["labels"]  # drawn, off the line
    boxes = drawn["label_boxes"]
    for i, a in enumerate(boxes):
        for j, b in enumerate(boxes[:i]):
            overlap_w = min(a[2], b[2]) - max(a[0], b[0])
            overlap_h = min(a[3], b[3]) - max(a[1], b[1])
            assert overlap_w <= 0 or overlap_h <= 0, f"labels {drawn['labels'][i]!r} and {drawn['labels'][j]!r} overlap"
