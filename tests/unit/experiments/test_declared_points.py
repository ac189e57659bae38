"""Every fio-matrix experiment declares its points from the default config, each about a metric
whose direction is declared (results/metrics.py)."""
from pathlib import Path

from harness.engine import settings
from harness.experiments import registry
from harness.experiments.fio_matrix import FioMatrix
from harness.results.metrics import Direction, direction


def test_every_matrix_experiment_declares_points_on_metrics_of_known_direction():
    trace = Path(__file__).parents[2] / "fixtures" / "fio" / "fio-3.33-randrw-capture.iolog"
    # fio-job's points come from a job file, replay's from a trace
    cfg = settings.load(None, ["fio_job.profile=qd1-latency", f"replay.trace={trace}"])
    matrix = [e for e in registry().values() if isinstance(e, FioMatrix)]
    names = {e.name for e in matrix}
    assert {"latency", "iops", "bandwidth", "backends", "breakdown", "latency-curve", "fio-job", "replay"} <= names
    for e in matrix:
        points = e.points(cfg)
        assert points, e.name
        assert all(isinstance(direction(p.headline), Direction) for p in points), e.name
