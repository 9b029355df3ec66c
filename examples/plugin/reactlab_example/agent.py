"""A text-history agent, written by hand with the official ``openai`` SDK and no framework.

:data:`TEXT_AGENT` (framework ``text_react``) satisfies the Framework protocol of
:mod:`reactlab.frameworks.registry`. It is the shape of a ReAct-text or code agent: its
history is text. Each turn it sends the task's tools and its own final-answer tool,
``respuesta_final(respuesta)``, on the Chat Completions API; it runs the model's tool
calls (read from ``tool_calls``) through the kit's tools, but never echoes them back as
``tool_calls`` items: the model's turn goes back as assistant TEXT (``Acción: name(args)``
lines) and the results as one USER message (``Observación de name: {json}`` lines). A call
to ``respuesta_final`` is the run's answer (``kit.answer_tool``); a plain-text reply is an
answer too. Its own cap: ``max_turns`` (setting; as shipped 10, capped: the run's step
limit), past which it raises its own ``TurnLimit``; any other exception ends the run as a
``framework_error`` named by its class.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import Field

from reactlab.frameworks.kit import Ending, FrameworkSettings

if TYPE_CHECKING:
    from reactlab.frameworks.kit import Kit, ToolDef

__all__ = ["ANSWER_TOOL", "NAME", "TEXT_AGENT", "TextReact", "TurnLimit"]

NAME = "text_react"
#: The agent's own final-answer tool (not the task's, and not named ``submit``).
ANSWER_TOOL = "respuesta_final"
SHIPPED_MAX_TURNS = 10

_ANSWER_DEFINITION = {"type": "function", "function": {
    "name": ANSWER_TOOL, "description": "Da la respuesta final a la pregunta.",
    "parameters": {"type": "object", "properties": {"respuesta": {
        "type": "string", "description": "La respuesta final."}},
        "required": ["respuesta"]}}}


class Settings(FrameworkSettings):
    """The agent's one setting: its own cap on model turns."""

    max_turns: int | None = Field(default=None, ge=1)


class TurnLimit(Exception):
    """The agent's own step cap."""


class TextReact:
    name = NAME
    providers = ("openai_chat",)
    settings = Settings
    packages = ("openai",)
    mcp = False

    def run(self, kit: Kit) -> Ending:
        import openai  # lazy: the SDK is the agent's, imported when it runs

        kit.answer_tool = ANSWER_TOOL
        client = openai.OpenAI(base_url=kit.base_url, api_key=kit.api_key,
                               http_client=kit.http_client(asynchronous=False))
        tools = {t.name: t for t in kit.tools}
        definitions: list[Any] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.schema}}
            for t in kit.tools] + [_ANSWER_DEFINITION]
        history: list[Any] = []
        if kit.system_prompt is not None:
            history.append({"role": "system", "content": kit.system_prompt})
        history.append({"role": "user", "content": kit.question})
        max_turns = (kit.max_steps if kit.capped
                     else int(kit.settings.get("max_turns", SHIPPED_MAX_TURNS)))
        try:
            for _ in range(max_turns):
                message = client.chat.completions.create(
                    model=kit.model, messages=history, tools=definitions).choices[0].message
                if not message.tool_calls:
                    return Ending("answer", "final_output", message.content or "")
                actions, observations = [], []
                for call in message.tool_calls:
                    if call.type != "function":  # a custom tool: none is offered
                        continue
                    name, text = call.function.name, call.function.arguments
                    args = _object(text)
                    if name == ANSWER_TOOL:
                        return Ending("answer", ANSWER_TOOL,
                                      str((args or {}).get("respuesta", "")))
                    actions.append(f"Acción: {name}({text})")
                    result = _execute(tools.get(name), name, args)
                    observations.append(f"Observación de {name}: {json.dumps(result)}")
                history.append({"role": "assistant", "content": "\n".join(actions)})
                history.append({"role": "user", "content": "\n".join(observations)})
            raise TurnLimit(f"more than {max_turns} turns")
        except TurnLimit:
            return Ending("framework_limit", "TurnLimit")
        except Exception as exc:  # the SDK's errors, a body it cannot parse: named
            return Ending("framework_error", type(exc).__name__)


def _execute(tool: ToolDef | None, name: str, args: dict[str, Any] | None
             ) -> dict[str, Any]:
    """The result of one call (the kit's tool; errors as data, as the tools give them)."""
    if tool is None:
        return {"error": f"herramienta desconocida: {name}"}
    if args is None:
        return {"error": "los argumentos no son un objeto JSON"}
    return tool.call(args)


def _object(text: str) -> dict[str, Any] | None:
    """The arguments' JSON object, or None when they are not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


TEXT_AGENT = TextReact()
