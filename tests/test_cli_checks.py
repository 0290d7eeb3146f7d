"""The checks the runtime CLIs share (goose_runtime/cli_checks.py); the CLIs' own tests run them
through each command."""
from __future__ import annotations

import pytest

from goose_runtime import cli_checks


def test_make_config_names_the_flag_of_a_bad_field():
    assert cli_checks.make_config(max_new_tokens=3, min_score=0.5).min_score == 0.5
    with pytest.raises(cli_checks.UsageError, match=r"^--max-new-tokens must be at least 1, got 0$"):
        cli_checks.make_config(max_new_tokens=0)
