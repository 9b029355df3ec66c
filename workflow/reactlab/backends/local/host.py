"""What the local provider offers an outside suite's shard (its ``Provider.models``): its
model loaded once for the shard's cases, their first turns decoded in batches, and what a
reader needs to reproduce the greedy text (the weights' dtype, the runtime's kernels).

A suite reaches the model only through the provider registry
(:meth:`reactlab.backends.registry.Provider.model_host`), never by importing this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reactlab.backends.local import load_model
from reactlab.backends.local.batch import first_turns
from reactlab.backends.local.kernels import runtime_record
from reactlab.backends.local.llama import LlamaCppModel
from reactlab.backends.local.model import LocalModel
from reactlab.core.errors import UsageError

if TYPE_CHECKING:
    from reactlab.agent.types import ModelTurn
    from reactlab.backends.registry import LoadedModel
    from reactlab.config import RunSpec

__all__ = ["LOCAL_MODELS", "LocalModels"]


def _local(model: LoadedModel) -> LocalModel:
    if not isinstance(model, LocalModel):
        raise UsageError(f"the local provider did not load {model.name!r}")
    return model


class LocalModels:
    """The local provider's :class:`~reactlab.backends.registry.ModelHost`."""

    def load(self, spec: RunSpec) -> LoadedModel:
        """The spec's model (its backend's ``model``, threads, dtype and sampling)."""
        return load_model(spec)

    def first_turns(self, model: LoadedModel, specs: Sequence[RunSpec], batch_size: int,
                    layout: list[list[str]]) -> list[ModelTurn | None]:
        """:func:`reactlab.backends.local.batch.first_turns` (none on llama.cpp: each
        case's session decodes it alone)."""
        if isinstance(model, LlamaCppModel):
            return [None] * len(specs)
        return first_turns(_local(model), specs, batch_size, layout)

    def describe(self, model: LoadedModel) -> dict[str, Any]:
        """The model's name and its weights' dtype (``gguf`` on llama.cpp)."""
        if isinstance(model, LlamaCppModel):
            return {"model": model.name, "dtype": "gguf", "engine": "llama_cpp"}
        weights = next(_local(model).model.parameters())
        return {"model": model.name, "dtype": str(weights.dtype).removeprefix("torch.")}

    def runtime(self) -> dict[str, Any]:
        """:func:`reactlab.backends.local.kernels.runtime_record`."""
        return runtime_record()


LOCAL_MODELS = LocalModels()
