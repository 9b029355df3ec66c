"""Local text-format backends: tool calls as Hermes/Qwen ``<tool_call>`` text.

Two modes share the conversation handling:

* ``scripted``: the scenario's script plays the model. Its actions are *written* as
  Hermes text (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``) and parsed
  back with the same parser a real model's output goes through, so every scripted
  scenario also exercises the local text path. Tokens sent are the o200k_base tokens of
  the rendered ChatML prompt (there is no model tokenizer to ask).
* ``model``: a real transformers model on the CPU (:mod:`reactlab.backends.local.model`), greedy.
  Tokens sent are the prompt's token count in the model's own tokenizer; tokens out are
  the generated tokens.

Tool results go back as ``tool`` messages with ``json.dumps(result, ensure_ascii=False)``,
as in the lesson's local loop, and the agent's system prompt is always the first message
(the tools' definitions are written into it): the sessions declare both
(``tool_results_ascii``, ``system_prompt_sent``: :class:`reactlab.agent.types.SessionFacts`),
and the runner records them in the trace header. Only the model's newly generated text
is parsed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from reactlab.agent.strategies import (
    PLAN_EXTRACT_PREFIX,
    PLAN_EXTRACT_PROMPT,
    PLAN_TOOL,
    PLAN_WRITE_PROMPT,
)
from reactlab.agent.types import BudgetExceeded, ModelTurn, ToolOutcome
from reactlab.backends import ToolsOf, tool_definitions
from reactlab.backends.local.grammar import Decoder, DecodingError, GrammarFactory, generate_with
from reactlab.backends.local.hermes import (
    calls_from_text,
    parse_tool_calls,
    render_tools_system,
)
from reactlab.backends.local.model import LocalModel
from reactlab.config.settings import ModelBackend
from reactlab.core.errors import ClientError, InternalError, ModelNotFound, ScriptError
from reactlab.core.tokens import count
from reactlab.simulate import parse_tool_output
from reactlab.tools import json_schema
from reactlab.tools.messages import tool_message

if TYPE_CHECKING:
    from reactlab.agent.types import Session
    from reactlab.config import RunSpec

def hermes_tools(spec: ToolsOf) -> list[dict[str, Any]]:
    """The task's tools in the chat-template function format."""
    return [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
            for n, d, s in tool_definitions(spec)]


def render_chatml(messages: list[dict[str, Any]]) -> str:
    """ChatML text of a conversation (tool results wrapped as Qwen's template does)."""
    parts = []
    for m in messages:
        if m["role"] == "tool":
            parts.append(f"<|im_start|>user\n<tool_response>\n{m['content']}\n"
                         "</tool_response><|im_end|>\n")
        else:
            parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


class _TextSession:
    """Chat messages, tools in the system prompt, results as ``tool`` messages."""

    #: The agent's system prompt is the first message, whatever ``send_system_prompt`` says.
    system_prompt_sent: ClassVar[bool] = True
    #: Tool results keep their UTF-8 text (the lesson's local loop).
    tool_results_ascii: ClassVar[bool] = False

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.tools = hermes_tools(spec) if spec.agent.send_tools else []
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": spec.agent.system_prompt},
            {"role": "user", "content": spec.question}]
        self.turn = 0

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.messages.append({"role": "tool", "content": tool_message(
                oc.result, delimit=oc.delimit, ensure_ascii=self.tool_results_ascii)})


class LocalScriptedSession(_TextSession):
    """The scenario script, speaking Hermes text."""

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.script = spec.script_obj()

    def prompt(self) -> str:
        system = render_tools_system(self.messages[0]["content"], self.tools)
        return render_chatml([{"role": "system", "content": system}, *self.messages[1:]])

    def _results(self) -> list[Any]:
        return [parse_tool_output(m["content"]) for m in self.messages if m["role"] == "tool"]

    def _write(self) -> str:
        # what the model has read: its tools' definitions (in the system prompt) and
        # every tool result (a poisoned description is seen like a poisoned result)
        seen = "\n".join([render_tools_system(self.messages[0]["content"], self.tools),
                          *(m["content"] for m in self.messages if m["role"] == "tool")])
        try:
            action = self.script.action(self.turn, self.spec.params, self.spec.question,
                                        self._results(), seen)
        except ScriptError as exc:
            raise ClientError(str(exc)) from exc
        if action.text is not None:
            return action.text
        blocks = []
        for c in action.calls:
            args = c.arguments_text() if c.raw_arguments is not None else json.dumps(
                c.arguments, ensure_ascii=False)
            blocks.append(f'<tool_call>\n{{"name": {json.dumps(c.name, ensure_ascii=False)}, '
                          f'"arguments": {args}}}\n</tool_call>')
        return "\n".join(blocks)

    def request(self, budget_left: int | None) -> ModelTurn:
        sent = count(self.prompt())
        if budget_left is not None and sent > budget_left:
            raise BudgetExceeded(sent, budget_left)
        text = self._write()
        parsed = parse_tool_calls(text)
        calls = calls_from_text(parsed, self.turn)
        self.messages.append({"role": "assistant", "content": text})
        self.turn += 1
        return ModelTurn(text=parsed.content if calls else text, calls=calls,
                         tokens_sent=sent, tokens_out=count(text))


class LocalModelSession(_TextSession):
    """A real transformers model, greedy, with prefix KV-cache reuse across steps."""

    def __init__(self, spec: RunSpec, model: LocalModel) -> None:
        super().__init__(spec)
        self.model = model
        settings = model_settings(spec)
        self.max_new_tokens = settings.max_new_tokens
        # Grammar-constrained decoding (see reactlab.backends.local.grammar); "free" keeps
        # the plain path below, so its traces stay as they were.
        self.decoding = settings.decoding
        self.decoder: Any = None
        self.had_ok_result = False
        if self.decoding != "free":
            try:
                self.decoder = Decoder(self.decoding, model, self.tools,
                                       settings.grammar_backend)
            except DecodingError as exc:
                raise ClientError(str(exc)) from exc

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        super().add_results(outcomes)
        self.had_ok_result = self.had_ok_result or any(oc.status == "ok" for oc in outcomes)

    def _request_constrained(self, budget_left: int | None) -> ModelTurn:
        prep = self.decoder.prepare(self.messages, required=not self.had_ok_result)
        if budget_left is not None and len(prep.ids) > budget_left:
            raise BudgetExceeded(len(prep.ids), budget_left)
        out = self.decoder.generate(prep, self.max_new_tokens)
        parsed = parse_tool_calls(out.text)
        calls = calls_from_text(parsed, self.turn)
        self.messages.append({"role": "assistant", "content": out.text})
        self.turn += 1
        return ModelTurn(text=parsed.content if calls else out.text, calls=calls,
                         tokens_sent=out.tokens_sent, tokens_out=out.tokens_out,
                         decoding=out.record)

    def request(self, budget_left: int | None) -> ModelTurn:
        if self.decoder is not None:
            return self._request_constrained(budget_left)
        ids = self.model.prompt_ids(self.messages, self.tools or None)
        if budget_left is not None and len(ids) > budget_left:
            raise BudgetExceeded(len(ids), budget_left)
        gen = self.model.generate(ids, max_new_tokens=self.max_new_tokens)
        text = gen.text.strip()
        parsed = parse_tool_calls(text)
        calls = calls_from_text(parsed, self.turn)
        self.messages.append({"role": "assistant", "content": text})
        self.turn += 1
        return ModelTurn(text=parsed.content if calls else text, calls=calls,
                         tokens_sent=len(ids), tokens_out=len(gen.new_ids))


# --------------------------------------------------------------------- plan and execute


class PlanExecuteSession:
    """The model's side of plan-and-execute (:class:`reactlab.agent.strategies.PlanExecute`).

    Turn 1 asks the model to extract the parameters (its answer is started with the JSON
    object the plan expects); turn 2 gives it the computed data to write the answer.
    The loop decides everything else: the call, its guarded execution, the budget.
    """

    #: Its system prompts are the plan's own (PLAN_EXTRACT_PROMPT, PLAN_WRITE_PROMPT),
    #: never the agent's.
    system_prompt_sent: ClassVar[bool] = False
    #: The computed data is written into the prompt with its UTF-8 text.
    tool_results_ascii: ClassVar[bool] = False

    def __init__(self, spec: RunSpec, model: LocalModel) -> None:
        self.spec = spec
        self.model = model
        settings = model_settings(spec)
        self.max_new_tokens = settings.max_new_tokens
        self.data: str | None = None  # the computed result, once the plan's call ran
        self.decoding = settings.decoding
        self.grammar_backend = settings.grammar_backend
        self._grammar: Any = None

    def _extraction_grammar(self) -> Any:
        """Under constrained decoding (any mode but "free") the extraction is masked by
        the JSON schema of `variacion`'s arguments instead of being started by
        PLAN_EXTRACT_PREFIX. Built once, on first use."""
        if self._grammar is None:
            factory = GrammarFactory(self.model.tokenizer, self.model.vocab_size,
                                     native=self.grammar_backend == "llama_cpp")
            self._grammar = factory.json_object(json_schema(PLAN_TOOL))
        return self._grammar

    def _prompt(self) -> tuple[list[int], str]:
        if self.data is None:
            messages = [{"role": "system", "content": PLAN_EXTRACT_PROMPT},
                        {"role": "user", "content": self.spec.question}]
            if self.decoding != "free":
                return self.model.prompt_ids(messages, None), ""
            text = self.model.prompt_text(messages, None) + PLAN_EXTRACT_PREFIX
            return list(self.model.tokenizer(text, add_special_tokens=False)["input_ids"]), (
                PLAN_EXTRACT_PREFIX)
        messages = [{"role": "system", "content": PLAN_WRITE_PROMPT},
                    {"role": "user",
                     "content": f"{self.spec.question}\n\nDatos calculados: {self.data}"}]
        return self.model.prompt_ids(messages, None), ""

    def request(self, budget_left: int | None) -> ModelTurn:
        ids, prefix = self._prompt()
        if budget_left is not None and len(ids) > budget_left:
            raise BudgetExceeded(len(ids), budget_left)
        record: dict[str, Any] | None = None
        if self.decoding == "free":
            gen = self.model.generate(ids, max_new_tokens=self.max_new_tokens)
        else:
            grammar = self._extraction_grammar() if self.data is None else None
            gen, record = generate_with(self.model, ids, self.max_new_tokens, self.decoding,
                                        grammar, prefix)
        return ModelTurn(text=(prefix + gen.text).strip(), calls=(), tokens_sent=len(ids),
                         tokens_out=len(gen.new_ids), decoding=record)

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            if "resultado" in oc.result:
                self.data = tool_message(oc.result["resultado"], delimit=oc.delimit,
                                         ensure_ascii=self.tool_results_ascii)


def model_settings(spec: RunSpec) -> ModelBackend:
    """The backend settings of a local-model run (ClientError for another mode)."""
    settings = spec.backend_config
    if not isinstance(settings, ModelBackend):
        raise ClientError(f"backend {spec.backend!r} runs in {settings.mode!r} mode, "
                          "not a local model")
    return settings


def load_model(spec: RunSpec) -> LocalModel:
    settings = model_settings(spec)
    try:
        if settings.engine == "llama_cpp":
            from reactlab.backends.local.llama import (  # lazy: optional engine (llama-cpp-python)
                LlamaCppModel,
            )

            model: LocalModel = LlamaCppModel.open(settings.model, threads=settings.threads,
                                                   reuse_cache=settings.reuse_cache)
        else:
            model = LocalModel.load(settings.model, threads=settings.threads,
                                    reuse_cache=settings.reuse_cache, dtype=settings.dtype)
    except ModelNotFound as exc:
        raise ClientError(str(exc)) from exc
    if settings.samples:
        if spec.seed is None:
            raise ClientError(f"{spec.key}: a sampling backend needs a seed")
        # no top_p: the whole distribution (nucleus 1.0)
        model.set_sampling(float(settings.temperature or 0),
                           float(settings.top_p if settings.top_p is not None else 1.0),
                           spec.seed)
    return model


# ------------------------------------------------------------- the provider's factories


class PrecomputedSession:
    """A session whose one turn was decoded in a batch (single-turn cases only). It says
    what the local model session that prepared its prompt says (the trace header of a
    batched case is the one-at-a-time case's)."""

    system_prompt_sent: ClassVar[bool] = _TextSession.system_prompt_sent
    tool_results_ascii: ClassVar[bool] = _TextSession.tool_results_ascii

    def __init__(self, turn: ModelTurn) -> None:
        self.turn: ModelTurn | None = turn

    def request(self, budget_left: int | None) -> ModelTurn:
        if self.turn is None:
            raise InternalError("a batched single-turn session has one turn")
        turn, self.turn = self.turn, None
        if budget_left is not None and turn.tokens_sent > budget_left:
            raise BudgetExceeded(turn.tokens_sent, budget_left)
        return turn

    def add_results(self, outcomes: list[Any]) -> None:
        """Single turn: results never go back."""


def open_local(spec: RunSpec, *, model: LocalModel | None = None,
               first_turn: ModelTurn | None = None) -> Session:
    """A session on the in-process backend: the scripted one, or the model in ``model``
    mode: ``model`` when given (a shard's, loaded once for its cases; its cache of the
    previous prompt is dropped), else loaded. ``first_turn``: the run's one turn, already
    decoded in a batch (:mod:`reactlab.backends.local.batch`)."""
    if spec.backend_config.mode == "model":
        if first_turn is not None:
            return PrecomputedSession(first_turn)
        if model is None:
            model = load_model(spec)
        else:
            model.reset_cache()
        return LocalModelSession(spec, model)
    return LocalScriptedSession(spec)


def open_plan_execute(spec: RunSpec) -> Session:
    """The model's side of plan-and-execute, on the backend's local model."""
    return PlanExecuteSession(spec, load_model(spec))
