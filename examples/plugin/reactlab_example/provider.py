"""The provider ``model_server``: your own OpenAI-compatible model server, under its own name.

A reactlab provider outside reactlab (docs/plugins.md): :data:`PROVIDER` is a
``reactlab.backends.registry.Provider`` declared by this package's entry point
``model_server`` in the group ``reactlab.providers``. A backend then writes
``provider: model_server``.

A server that speaks the Chat Completions API (vLLM, llama.cpp's server, Ollama,
``transformers serve``) needs no code of its own: its wire API, simulator, adapter and
recordings are the ``openai_chat`` provider's, reused here. What a provider of its own
adds is its name, in the traces, tables and exports (``gen_ai.provider.name``), and its
own Snakemake resource, ``model_server_slots``: ``--resources model_server_slots=1``
keeps one request at a time on your server while the hosted APIs run in parallel. A
server with a wire API of its own is a ``WireApi`` and an adapter besides (the shape of
tests/toy_provider.py in the reactlab repository).
"""

from __future__ import annotations

from reactlab.backends.registry import CONVERSATION, Provider
from reactlab.simulate.apis import OPENAI_CHAT

__all__ = ["PROVIDER"]

#: The entry point ``model_server`` (group ``reactlab.providers``).
PROVIDER = Provider(
    "model_server",
    {CONVERSATION: ("reactlab.backends.openai_chat", "OpenAIChatSession")},
    api=OPENAI_CHAT, packages=("openai", "httpx"), loggers=("openai",),
    quiet=("httpx", "httpcore"))
