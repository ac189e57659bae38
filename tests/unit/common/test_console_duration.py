"""A duration as the plan and the progress bar say it: rounded once, never "5 min 60 s"."""
import pytest

from harness.common.console import duration


@pytest.mark.parametrize("seconds, said", [(42.4, "42 s"), (359.6, "6 min 0 s"), (125.2, "2 min 5 s"),
                                           (1200, "20 min"), (9000, "2.5 h")])
def test_a_duration_reads_as_a_person_would_say_it(seconds, said):
    assert duration(seconds) == said
