"""Ctrl-C stays Ctrl-C: found behind a cleanup's error that took its place; and a teardown runs
with the stop signal lowered, which is raised again after it."""
from harness.common import cancel
from harness.common.cancel import CANCEL, Terminated


def _hidden(stop: BaseException) -> Exception:
    try:
        try:
            raise stop
        finally:   # a cleanup whose command is stopped because the run is being stopped
            raise RuntimeError("vm0: cancelled; killed /bin/sh in the guest")
    except RuntimeError as e:
        return e


def test_a_ctrl_c_behind_a_cleanups_error_is_found_and_an_error_alone_is_not():
    stop = KeyboardInterrupt()
    assert cancel.interrupt_in(_hidden(stop)) is stop
    term = Terminated("signal 15")
    assert cancel.interrupt_in(_hidden(term)) is term
    assert cancel.interrupt_in(RuntimeError("fio exited 1")) is None


def test_a_teardown_runs_with_the_stop_lowered_and_it_is_raised_again():
    CANCEL.set()
    try:
        with cancel.lowered():
            assert not CANCEL.is_set()
        assert CANCEL.is_set()
    finally:
        CANCEL.clear()
    with cancel.lowered():
        pass
    assert not CANCEL.is_set()
