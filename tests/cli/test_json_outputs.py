"""Every --json output is one JSON document with a `format` version."""

from __future__ import annotations

import json

import pytest

from sandcrew.sandbox.images import DEFAULT_IMAGES
from tests.process import run_cli


def test_suite_list_json() -> None:
    completed = run_cli("suite", "list", "--json")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["format"] == 1
    basics = next(suite for suite in document["suites"] if suite["name"] == "basics")
    assert basics["task_count"] == 14


@pytest.mark.docker
def test_images_list_json() -> None:
    completed = run_cli("images", "list", "--json")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["format"] == 1
    python = next(image for image in document["images"] if image["name"] == "python")
    assert python["tag"] == DEFAULT_IMAGES["python"]
    assert python["present"] is True


@pytest.mark.docker
def test_doctor_json() -> None:
    completed = run_cli("doctor", "--no-self-test", "--json", env={"OPENAI_BASE_URL": ""})
    assert completed.returncode == 0, completed.stdout
    document = json.loads(completed.stdout)
    assert document["format"] == 1
    assert document["ok"] is True
    names = [check["name"] for check in document["checks"]]
    assert "docker engine" in names
    assert "setting endpoint.model" in names


@pytest.mark.docker
def test_run_json_has_a_format() -> None:
    completed = run_cli("run", "-", "--json", stdin="print(42)")
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert (document["format"], document["stdout"], document["exit_code"]) == (1, "42\n", 0)
