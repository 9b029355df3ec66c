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
as in the lesson's local loop. Only the model's newly generated text is parsed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from reactlab.agent.types import BudgetExceeded, ModelTurn, ToolCall, ToolOutcome
from reactlab.backends import tool_definitions
from reactlab.backends.local.hermes import ParseResult, parse_tool_calls, render_tools_system
from reactlab.core.errors import ClientError, ScriptError
from reactlab.tools.messages import tool_message

if TYPE_CHECKING:
    from reactlab.backends.local.model import LocalModel
    from reactlab.config import RunSpec

DEFAULT_MAX_NEW_TOKENS = 80


def hermes_tools(spec: RunSpec) -> list[dict[str, Any]]:
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


def calls_from_text(parsed: ParseResult, turn: int) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(id=f"call_{turn}_{i}", name=c.name,
                          arguments=c.arguments if c.valid else None,
                          raw=None if c.valid else c.raw)
                 for i, c in enumerate(parsed.calls))


class _TextSession:
    """Chat messages, tools in the system prompt, results as ``tool`` messages."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.tools = hermes_tools(spec) if spec.agent["send_tools"] else []
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": spec.agent["system_prompt"]},
            {"role": "user", "content": spec.question}]
        self.turn = 0

    def add_results(self, outcomes: list[ToolOutcome]) -> None:
        for oc in outcomes:
            self.messages.append({"role": "tool", "content": tool_message(
                oc.result, delimit=oc.delimit, ensure_ascii=False)})


class LocalScriptedSession(_TextSession):
    """The scenario script, speaking Hermes text."""

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.script = spec.script_obj()

    def prompt(self) -> str:
        system = render_tools_system(self.messages[0]["content"], self.tools)
        return render_chatml([{"role": "system", "content": system}, *self.messages[1:]])

    def _results(self) -> list[Any]:
        from reactlab.simulate import parse_tool_output

        return [parse_tool_output(m["content"]) for m in self.messages if m["role"] == "tool"]

    def _write(self) -> str:
        seen = "\n".join(m["content"] for m in self.messages if m["role"] == "tool")
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
        from reactlab.core.tokens import count

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
        self.max_new_tokens = int(spec.backend_config.get("max_new_tokens",
                                                          DEFAULT_MAX_NEW_TOKENS))
        # Grammar-constrained decoding (see reactlab.backends.local.grammar); "free" keeps
        # the plain path below, so its traces stay as they were.
        self.decoding = str(spec.backend_config.get("decoding", "free"))
        self.decoder: Any = None
        self.had_ok_result = False
        if self.decoding != "free":
            from reactlab.backends.local.grammar import Decoder, DecodingError

            try:
                self.decoder = Decoder(self.decoding, model, self.tools)
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

PLAN_EXTRACT_PROMPT = (
    "Extrae de la pregunta los parámetros para calcular la variación del cierre de una "
    "acción. Responde solo con un objeto JSON con las claves \"ticker\", \"desde\" y "
    "\"hasta\" (fechas AAAA-MM-DD), sin texto adicional.\n\n"
    "Ejemplo:\nPregunta: ¿Cuánto varió el cierre de ABCD entre el 2023-05-02 y el "
    "2023-06-01?\nJSON: {\"ticker\": \"ABCD\", \"desde\": \"2023-05-02\", "
    "\"hasta\": \"2023-06-01\"}")
#: The program starts the model's answer with the JSON object it expects: the plan, not
#: the model, decides the output format (a small model otherwise answers in prose).
PLAN_EXTRACT_PREFIX = '{"ticker": "'
PLAN_WRITE_PROMPT = (
    "Eres un asistente de research de renta variable. Contesta en español en una o dos "
    "frases usando solo los datos calculados que se te dan; no inventes cifras.")
PLAN_TOOL = "variacion"


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (models often wrap it in prose or fences)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                value, _ = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                return value
    return None


def run_plan_execute(spec: RunSpec, model: LocalModel, tools: Any,
                     emit: Any) -> dict[str, Any]:
    """The program holds the plan: extract (model) → validate and compute (code) →
    write (model). The verifier checks the answer afterwards like any other run."""
    max_new = int(spec.backend_config.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS))
    sent = calls = errors = 0
    budget = spec.limits["token_budget"]
    # Constrained decoding (any mode but "free"): the extraction is masked by the JSON
    # schema of `variacion`'s arguments instead of being started by PLAN_EXTRACT_PREFIX.
    decoding = str(spec.backend_config.get("decoding", "free"))
    extraction_grammar: Any = None
    if decoding != "free":
        from reactlab.backends.local.grammar import GrammarFactory, generate_with
        from reactlab.tools import json_schema

        factory = GrammarFactory(model.tokenizer, int(model.model.config.vocab_size))
        extraction_grammar = factory.json_object(json_schema(PLAN_TOOL))

    def generate(step: int, messages: list[dict[str, Any]], prefix: str = "",
                 grammar: Any = None) -> str | None:
        nonlocal sent
        if prefix:
            prompt = model.prompt_text(messages, None) + prefix
            ids = list(model.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        else:
            ids = model.prompt_ids(messages, None)
        if budget is not None and sent + len(ids) > budget:
            emit({"type": "guardrail", "step": step, "rule": "token_budget",
                  "tokens_refused": len(ids), "tokens_left": budget - sent})
            return None
        record: dict[str, Any] | None = None
        if decoding == "free":
            gen = model.generate(ids, max_new_tokens=max_new)
        else:
            gen, record = generate_with(model, ids, max_new, decoding, grammar, prefix)
        sent += len(ids)
        text = (prefix + gen.text).strip()
        request = {"type": "request", "step": step, "tokens_sent": len(ids),
                   "cumulative_tokens": sent, "tokens_out": len(gen.new_ids), "attempts": 1,
                   "text": text, "n_calls": 0}
        if record is not None:
            request["decoding"] = record
        emit(request)
        return text

    def end(termination: str, steps: int, answer: str | None = None) -> dict[str, Any]:
        return {"termination": termination, "steps": steps, "answer": answer,
                "tokens_sent": sent, "calls": calls, "errors": errors}

    text = generate(1, [{"role": "system", "content": PLAN_EXTRACT_PROMPT},
                        {"role": "user", "content": spec.question}],
                    PLAN_EXTRACT_PREFIX if extraction_grammar is None else "",
                    extraction_grammar)
    if text is None:
        return end("token_budget", 1)
    params = first_json_object(text)
    call = ToolCall(id="plan_0", name=PLAN_TOOL, arguments=params,
                    raw=None if params is not None else text)
    if params is None:
        result, status = {"error": "llamada con JSON no válido"}, "invalid"
    else:
        result = tools.execute(PLAN_TOOL, params, [PLAN_TOOL])
        status = "error" if "error" in result else "ok"
    calls, errors = 1, int(status != "ok")
    rec: dict[str, Any] = {"type": "tool_call", "step": 1, "id": call.id, "name": PLAN_TOOL,
                           "arguments": params, "status": status, "result": result}
    if call.raw is not None:
        rec["raw"] = call.raw
    emit(rec)
    if status != "ok":
        emit({"type": "guardrail", "step": 1, "rule": "plan_failed",
              "detail": result["error"]})
        return end("plan_failed", 1)
    data = json.dumps(result["resultado"], ensure_ascii=False)
    answer = generate(2, [{"role": "system", "content": PLAN_WRITE_PROMPT},
                          {"role": "user", "content": f"{spec.question}\n\nDatos calculados: "
                                                      f"{data}"}])
    if answer is None:
        return end("token_budget", 2)
    emit({"type": "answer", "step": 2, "text": answer})
    return end("answer", 2, answer)


def load_model(spec: RunSpec) -> LocalModel:
    from reactlab.backends.local.model import LocalModel, ModelNotFound

    cfg = spec.backend_config
    try:
        model = LocalModel.load(cfg["model"], threads=int(cfg.get("threads", 1)),
                                reuse_cache=bool(cfg.get("reuse_cache", True)))
    except ModelNotFound as exc:
        raise ClientError(str(exc)) from exc
    if float(cfg.get("temperature", 0) or 0) > 0:
        if spec.seed is None:
            raise ClientError(f"{spec.key}: a sampling backend needs a seed")
        model.set_sampling(float(cfg["temperature"]), float(cfg.get("top_p", 1.0)), spec.seed)
    return model
