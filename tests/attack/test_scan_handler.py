"""Hostile tests of the scan handler's outputs: CloudWatch metric dimensions."""

from __future__ import annotations

import pytest

from costguard.domain.tags import normalise_project
from costguard.handlers.scan import metric_dimension


@pytest.mark.parametrize("raw", ["Vision Research 🇫🇷", "ｖｉｓｉｏｎ-é", "計算機"])
def test_every_valid_project_gets_a_dimension_cloudwatch_accepts(raw: str) -> None:
    # GIVEN a project name the tag contract accepts (the first is the README's own example)
    project = normalise_project(raw)
    assert project is not None
    # WHEN the scan emits its metrics for it
    value = metric_dimension(project)
    # THEN the dimension value is one CloudWatch takes: "Dimension values must contain
    # only ASCII characters and must include at least one non-whitespace character"
    # (CloudWatch API reference, Dimension); otherwise the project's metrics never land
    # and its dashboard widgets stay empty
    assert value.isascii() and value.strip(), f"{value!r} is not an ASCII dimension value"
