"""A toy agent framework, in this one module: the seam of reactlab.frameworks proved.

Importing this module registers the framework ``toy_loop`` (:func:`reactlab.frameworks.
registry.register`); nothing in the package names it. It is the smallest agent a user
writes with the official ``openai`` SDK: Chat Completions, the task's tools as the API's
tool definitions, each call run through the kit's tool (the lesson's validation, errors
as data), results sent back as ``tool`` messages with the tool's JSON, until the model
answers. Its own cap: ``max_turns`` (setting; as shipped 10, capped: the run's step
limit); past it the loop raises its own ``TurnLimit``. tests/test_agents.py runs it
through the matrix and the runner, so the whole pipeline sees a framework's trace.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from reactlab.frameworks.kit import FrameworkSettings, Kit
from reactlab.frameworks.registry import Ending, register

NAME = "toy_loop"
SHIPPED_MAX_TURNS = 10


class TurnLimit(Exception):
    """The toy's own step cap."""


class Settings(FrameworkSettings):
    """The toy's one setting: its own cap on model turns."""

    max_turns: int | None = Field(default=None, ge=1)


class ToyLoop:
    name = NAME
    providers = ("openai_chat",)
    settings = Settings
    packages = ("openai",)
    mcp = False

    def run(self, kit: Kit) -> Ending:
        import openai

        client = openai.OpenAI(base_url=kit.base_url, api_key=kit.api_key, max_retries=0,
                               http_client=kit.http_client(asynchronous=False))
        tools = {t.name: t for t in kit.tools}
        definitions = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.schema}}
            for t in kit.tools]
        messages: list[dict[str, Any]] = []
        if kit.system_prompt is not None:
            messages.append({"role": "system", "content": kit.system_prompt})
        messages.append({"role": "user", "content": kit.question})
        max_turns = (kit.max_steps if kit.capped
                     else int(kit.settings.get("max_turns", SHIPPED_MAX_TURNS)))
        try:
            for _ in range(max_turns):
                answer = client.chat.completions.create(model=kit.model, messages=messages,
                                                        tools=definitions)
                message = answer.choices[0].message
                if not message.tool_calls:
                    return Ending("answer", "final_output", message.content or "")
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    try:
                        args = json.loads(call.function.arguments)
                    except ValueError:
                        args = None
                    tool = tools.get(call.function.name)
                    if tool is None:
                        result: dict[str, Any] = {"error": f"no tool {call.function.name}"}
                    elif not isinstance(args, dict):
                        result = {"error": "arguments are not a JSON object"}
                    else:
                        result = tool.call(args)
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": json.dumps(result)})
            raise TurnLimit(f"more than {max_turns} turns")
        except TurnLimit:
            return Ending("framework_limit", "TurnLimit")
        except openai.APIError as exc:
            return Ending("framework_error", type(exc).__name__)


TOY = register(ToyLoop())

__all__ = ["NAME", "TOY", "ToyLoop", "TurnLimit"]
