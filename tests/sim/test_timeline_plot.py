from seamlessflow.core.timeline import Interval
from seamlessflow.sim.timeline_plot import draw_timeline


def test_draw_timeline_writes_a_png(tmp_path):
    intervals = [Interval("gpu000", 0.0, 3.0, "rollout"), Interval("gpu001", 1.0, 3.0, "train")]
    out = draw_timeline(intervals, tmp_path / "t.png", "demo")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
