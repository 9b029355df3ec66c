"""The built-in providers: one :class:`~reactlab.backends.registry.Provider` each, declared
as entry points in reactlab's pyproject.toml (group ``reactlab.providers``), as a plugin
package declares its own (docs/plugins.md). Each names its session factories as (module,
attribute) strings, so loading an entry imports no SDK."""

from __future__ import annotations

from reactlab.backends.registry import CONVERSATION, Provider
from reactlab.simulate import apis

__all__ = ["ANTHROPIC", "LOCAL", "OPENAI", "OPENAI_CHAT"]

OPENAI = Provider("openai", {CONVERSATION: ("reactlab.backends.openai_responses",
                                            "OpenAIResponsesSession")},
                  api=apis.OPENAI_RESPONSES, packages=("openai", "httpx"), loggers=("openai",),
                  quiet=("httpx", "httpcore"))
ANTHROPIC = Provider("anthropic", {CONVERSATION: ("reactlab.backends.anthropic_messages",
                                                  "AnthropicMessagesSession")},
                     api=apis.ANTHROPIC_MESSAGES, packages=("anthropic", "httpx2"),
                     loggers=("anthropic",), quiet=("httpx2", "httpcore2"))
OPENAI_CHAT = Provider("openai_chat", {CONVERSATION: ("reactlab.backends.openai_chat",
                                                      "OpenAIChatSession")},
                       api=apis.OPENAI_CHAT, packages=("openai", "httpx"), loggers=("openai",),
                       quiet=("httpx", "httpcore"))
LOCAL = Provider("local", {CONVERSATION: ("reactlab.backends.local", "open_local"),
                           "plan_execute": ("reactlab.backends.local", "open_plan_execute")},
                 packages=("transformers", "torch"),
                 models=("reactlab.backends.local.host", "LOCAL_MODELS"))
