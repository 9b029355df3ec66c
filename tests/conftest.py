from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_CONNECT = socket.socket.connect
_CREATE_CONNECTION = socket.create_connection


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


def _host(address: Any) -> str | None:
    return address[0] if isinstance(address, tuple) and address else None


@pytest.fixture
def loopback(_no_network: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Allow connections to loopback addresses only (after the blanket refusal above):
    for the tests that drive the simulator server over a real socket."""

    def connect(self: socket.socket, address: Any) -> Any:
        if _host(address) not in LOOPBACK:
            raise RuntimeError(f"a test tried to connect to {address!r} (not loopback)")
        return _CONNECT(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if _host(address) not in LOOPBACK:
            raise RuntimeError(f"a test tried to connect to {address!r} (not loopback)")
        return _CREATE_CONNECTION(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", create_connection)


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
