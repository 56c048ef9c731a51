import pytest
from plan_helpers import plan_and_files


@pytest.fixture
def planned(tmp_path):
    return plan_and_files(tmp_path)
