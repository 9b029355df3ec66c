from __future__ import annotations

import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from this run instead of comparing (review "
                          "the diff before committing)")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may open a network connection: everything goes through injected transports."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="session")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from reactlab import config, data

    seed = config.load(ROOT / "config.yaml").data["seed"]
    return data.write(tmp_path_factory.mktemp("data"), seed)


@pytest.fixture(scope="session")
def toolbox(data_files: tuple[Path, Path]):
    from reactlab.tools import ToolBox

    return ToolBox.from_files(*data_files)


@pytest.fixture
def raw_config() -> dict:
    from reactlab.config import load_yaml

    return load_yaml(ROOT / "config.yaml")


def offline_blocks(raw: dict) -> list[dict]:
    """The matrix blocks that run by default: those without a live backend (live blocks
    run only with `live: {enabled: true}`)."""
    return [b for b in raw["matrix"]
            if not any(raw["backends"][x]["mode"] == "live" for x in b["backends"])]
