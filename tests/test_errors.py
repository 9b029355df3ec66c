"""The exception tree (core/errors.py): one tree, documented in one docstring."""

from __future__ import annotations

import inspect

import pytest

from reactlab.core import errors
from reactlab.core.errors import (
    BackendError,
    ClientError,
    ModelNotFound,
    NetworkError,
    ProtocolError,
    RateLimitError,
    ReactlabError,
    RecordingError,
    RequestTimeoutError,
    ServerError,
)


def _classes() -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, ReactlabError) and c.__module__ == errors.__name__]


def test_every_error_class_is_in_the_tree_docstring() -> None:
    doc = errors.__doc__ or ""
    names = {c.__name__ for c in _classes()}
    assert {"ModelNotFound", "RecordingError", "NetworkError"} <= names
    assert "\n    ReactlabError\n" in doc
    for name in names - {"ReactlabError"}:
        assert f"── {name} " in doc or f"── {name}\n" in doc, name


def test_moved_errors_are_still_importable_where_they_were_raised() -> None:
    from reactlab.backends import recording
    from reactlab.backends.local import model

    assert recording.RecordingError is RecordingError
    assert model.ModelNotFound is ModelNotFound
    assert issubclass(ModelNotFound, ReactlabError) and issubclass(RecordingError, ReactlabError)


@pytest.mark.parametrize(("cls", "kind"), [
    (RateLimitError, "rate_limit"), (ServerError, "server"), (ClientError, "client"),
    (ProtocolError, "protocol"), (RequestTimeoutError, "timeout"), (NetworkError, "connection"),
])
def test_one_subclass_per_kind(cls: type[BackendError], kind: str) -> None:
    err = cls("boom", status=500)
    assert isinstance(err, BackendError) and cls.kind == err.kind == kind
    assert str(err) == f"{kind}: boom"
    assert (err.status, err.attempts, err.retryable, err.history) == (500, 1, False, [])
    made = BackendError.of_kind(kind, "x", status=7)
    assert type(made) is cls and made.status == 7


def test_kinds_are_exactly_the_subclasses() -> None:
    subclasses = {c.kind for c in BackendError.__subclasses__()}
    assert subclasses == set(BackendError.KINDS)


def test_base_backend_error_and_unknown_kinds_are_refused() -> None:
    with pytest.raises(TypeError, match="abstract"):
        BackendError("boom")
    with pytest.raises(ValueError, match="unknown backend error kind: teapot"):
        BackendError.of_kind("teapot", "x")


def test_gave_up_sets_fields_and_message() -> None:
    err = ServerError("down", status=503)
    err.gave_up(3, [{"attempt": 1}], True)
    assert (err.attempts, err.history, err.retryable) == (3, [{"attempt": 1}], True)
    assert str(err) == "server: down (gave up after 3 attempts)"
    one = ClientError("bad")
    one.gave_up(1, [], False)
    assert str(one) == "client: bad"
