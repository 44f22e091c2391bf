"""A team's teacher is at one place: an endpoint's URL or one of the stack's engines."""

import pytest
from pydantic import ValidationError

from seamlessflow.teacher.options import TeacherOptions, TeacherSpec


def test_a_teacher_is_at_a_url_or_a_stack_engine_and_not_both():
    options = TeacherOptions.model_validate({"teams": {"red": {"url": "http://t:8000"},
                                                       "blue": {"engine": "rollout-0", "model": "red"}}})
    assert options.teaches("red") and options.teaches("blue") and not options.teaches("green")
    for neither_or_both in ({}, {"url": "http://t:8000", "engine": "rollout-0"}):
        with pytest.raises(ValidationError, match="exactly one of them"):
            TeacherSpec.model_validate(neither_or_both)
