"""The scaling answers on recorded-shape repeats: efficiency and its CI, the share of bare metal,
where a curve stops rising (or that it kept rising), and a best backend named only where the test
allows."""
from harness.analysis import scaling


def test_a_curve_that_keeps_rising_has_no_knee_and_its_efficiency_ci_holds_the_truth():
    virtual = {1: [100, 102, 98], 2: [190, 194, 186], 4: [360, 366, 354]}
    physical = {1: [400, 404, 396], 2: [800, 790, 810], 4: [1600, 1590, 1610]}
    steps = scaling.curve(virtual, physical)
    assert [s.vm_count for s in steps] == [1, 2, 4] and steps[0].efficiency is None and steps[0].rose is None
    assert all(s.rose for s in steps[1:]) and scaling.knee(steps) is None
    assert scaling.knee_text(steps) == "kept rising to 4 VMs"
    eff2, eff4 = steps[1].efficiency, steps[2].efficiency
    assert abs(eff2.ratio - 0.95) < 0.01 and eff2.low < 0.95 < eff2.high
    assert abs(eff4.ratio - 0.90) < 0.01 and eff4.high < 1          # significantly sub-linear
    assert abs(steps[0].share.ratio - 0.25) < 0.01                   # a quarter of bare metal at 1 VM


def test_a_curve_that_stops_rising_names_the_first_count_without_a_significant_gain():
    virtual = {1: [100, 103, 97], 2: [180, 186, 175], 4: [182, 170, 192], 8: [185, 160, 200]}
    steps = scaling.curve(virtual)
    assert steps[1].rose and steps[2].rose is False and scaling.knee(steps) == 4
    assert scaling.knee_text(steps).startswith("no significant gain from 2 to 4 VMs")
    assert steps[0].share is None and steps[2].gain_p >= steps[2].gain.p_value   # Holm never lowers a p


def test_a_significant_drop_is_named_a_drop_not_a_gain_without_significance():
    """A fall whose CI holds no change is not significant; one whose CI is all below it is a drop."""
    steps = scaling.curve({1: [100, 102, 98], 2: [180, 183, 178], 4: [140, 145, 138]})
    assert steps[1].rose and steps[2].rose is False and steps[2].fell and steps[2].gain.high < 1
    assert steps[2].gain_text().endswith("(a significant drop)") and steps[1].gain_text().startswith("+")
    assert scaling.knee_text(steps).startswith("the aggregate fell from 2 to 4 VMs (-")
    flat = scaling.curve({1: [100, 103, 97], 2: [180, 186, 175], 4: [182, 170, 192]})
    assert flat[2].fell is False and flat[2].gain_text().endswith("(not significant)") and flat[0].gain_text() == "-"


def test_without_a_one_vm_count_there_is_no_efficiency_and_one_count_is_no_curve():
    steps = scaling.curve({2: [10, 11, 12], 4: [20, 21, 22]})
    assert all(s.efficiency is None for s in steps)
    assert scaling.knee_text(scaling.curve({1: [1.0, 1.1]})) == "one VM count: no curve"


def test_the_best_backend_is_named_only_where_the_test_allows():
    by_backend = {"virtio-blk": {1: [100, 101, 99], 2: [200, 203, 197]},
                  "nvme": {1: [100, 104, 96], 2: [150, 152, 148]}}
    best = {b.vm_count: b for b in scaling.best_by_count(by_backend)}
    assert not best[1].called and "no significant difference between" in best[1].text()
    assert best[2].called and best[2].ranked == ["virtio-blk", "nvme"]
    assert best[2].text().startswith("2 VM(s): virtio-blk scales best, +33% (95% CI")
    lone = scaling.best_by_count({"nvme": {1: [1.0, 2.0]}})
    assert lone[0].text() == "1 VM(s): only nvme measured"
