"""The `example` fixture: parse an example program by file name."""

import pytest
from example_programs import load_example


@pytest.fixture
def example():
    return load_example
