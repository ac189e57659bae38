"""The regression model on synthetic data with a known formula."""
import math

import numpy as np
import pytest

from harness.analysis.model import anomalies, fit


def rows(noise=0.0, seed=0, outlier=False):
    rng = np.random.default_rng(seed)
    out = []
    for backend, factor in (("virtio-blk", 1.0), ("nvme", 1.3)):
        for qd in (1, 2, 4, 8, 16, 32):
            for bs in ("4k", "16k", "64k"):
                b = int(bs[:-1]) * 1024
                # IOPS = 50 * qd^0.8 * bs^-0.3 * backend factor
                y = 50 * qd ** 0.8 * b ** -0.3 * factor * math.exp(rng.normal(0, noise))
                out.append({"metric": "iops", "value": y, "status": "ok", "scope": "vm", "group": "iops",
                            "iodepth": qd, "bs": bs, "backend": backend, "env": "virtual", "numjobs": 1})
    if outlier:
        out[5]["value"] *= 3
    return out


def test_recovers_a_known_formula():
    m = fit(rows(), "iops")
    assert m.numeric == ["iodepth", "bs_bytes"] and m.levels == {"backend": ["nvme", "virtio-blk"]}
    assert m.coef[1] == pytest.approx(0.8) and m.coef[2] == pytest.approx(-0.3)
    assert math.exp(-m.coef[3]) == pytest.approx(1.3)   # nvme is the reference level
    assert m.r2 == pytest.approx(1.0) and m.loo_mape == pytest.approx(0.0, abs=1e-9)
    assert m.predict({"iodepth": 64, "bs_bytes": 8192, "backend": "virtio-blk"}) == \
        pytest.approx(50 * 64 ** 0.8 * 8192 ** -0.3)


def test_noise_lowers_r2_and_shows_as_held_out_error():
    m = fit(rows(noise=0.1, seed=3), "iops")
    assert 0.9 < m.r2 < 1.0 and 0.02 < m.loo_mape < 0.3


def test_anomaly_flag_finds_the_planted_outlier():
    data = rows(noise=0.02, seed=4, outlier=True)
    flagged = anomalies(fit(data, "iops"), data)
    assert len(flagged) == 1 and flagged[0][0]["iodepth"] == data[5]["iodepth"]


def test_unknown_level_and_too_few_points_are_errors():
    m = fit(rows(), "iops")
    with pytest.raises(ValueError, match="backend=vfio was not in the run .*Fix: --at backend="):
        m.predict({"iodepth": 4, "bs_bytes": 4096, "backend": "vfio"})
    with pytest.raises(ValueError, match="the model needs backend .*Fix: --at backend="):
        m.predict({"iodepth": 4, "bs_bytes": 4096})
    with pytest.raises(ValueError, match="a positive iodepth .*Fix: --at iodepth=NUMBER"):
        m.predict({"iodepth": "", "bs_bytes": 4096, "backend": "virtio-blk"})
    with pytest.raises(ValueError, match="at least 3"):
        fit(rows()[:2], "iops")
