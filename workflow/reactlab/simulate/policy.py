"""The scripted model: which action a scenario's script takes on a request, as the
request's ``tool_choice`` and parallel-call flags let it (:class:`ScriptedPolicy`,
:class:`ToolChoice`), and how it gives an answer: in text, or through the agent's own
answer tool when the request offers one (:meth:`ScriptedPolicy.answer_tool`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reactlab.config.scripts import Action, Script, ScriptedCall

if TYPE_CHECKING:
    from reactlab.config import RunSpec


def answer_field(schema: Any) -> str | None:
    """The first required property of a tool's JSON ``schema`` that takes text (typed
    ``string``, a type list with ``string``, or untyped), or None: where a tool that
    could be an agent's answer tool takes the answer (Inspect's ``submit``: ``answer``)."""
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    required = schema.get("required")
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    for name in required:
        prop = properties.get(name) if isinstance(name, str) else None
        if not isinstance(prop, Mapping):
            continue
        kind = prop.get("type", "string")
        if kind == "string" or (isinstance(kind, list) and "string" in kind):
            return str(name)
    return None


def answer_fields(tools: Iterable[tuple[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(name, :func:`answer_field`) of each (name, schema) in ``tools`` that has one."""
    return tuple((name, f) for name, schema in tools
                 if (f := answer_field(schema)) is not None)


@dataclass(frozen=True)
class ScriptedPolicy:
    """Scripts by model name, and the task they play."""

    scripts: Mapping[str, Script]
    params: Mapping[str, Any]
    question: str
    #: The model name an answer gives for a requested name (default: the name itself);
    #: the server answers an alias with the script that plays, as a real API would.
    answer_names: Mapping[str, str] = field(default_factory=dict)
    #: The names of the task's own tools. A tool the request offers beside them may be
    #: the agent's answer tool (:meth:`answer_tool`); the task's tools never are. None:
    #: unknown, and then no offered tool is taken for an answer tool (the model answers
    #: in text, whatever tools it is offered).
    tools: frozenset[str] | None = None
    #: Whether a request that offers no tools gets no calls (a real API's behaviour: the
    #: answer is text, as with ``tool_choice: none``). On for every run that sends its
    #: tools (:meth:`of_run`): a tool-less request there is a side request (Inspect's
    #: reasoning-summary probe, an agent's summarising turn). Off only where the config
    #: declares the tools withheld from the wire (``agent.send_tools: false``, the
    #: lesson's overlay workflow/configs/lesson.yaml, which measures the lesson's tokens
    #: without definitions): there the script knows its tools, as the lesson's did.
    calls_need_tools: bool = False

    @classmethod
    def of_run(cls, spec: RunSpec) -> ScriptedPolicy:
        """The policy of one run: its scenario's script under its model name, its task's
        parameters, question and tools (its own, an outside suite's or an MCP server's);
        calls only on a request that offers tools, unless its tools are withheld from the
        wire (``agent.send_tools: false``)."""
        named = {t.get("name") for t in spec.tool_schemas or ()}
        return cls({spec.script.model: spec.script_obj()}, spec.params, spec.question,
                   tools=frozenset(spec.tools) | {n for n in named if isinstance(n, str)},
                   calls_need_tools=spec.framework is not None or spec.agent.send_tools)

    def answer_tool(self, model: str, choice: ToolChoice) -> tuple[str, str] | None:
        """The agent's own answer tool among those ``choice`` offers, and the property
        the answer goes in; None when it offers none (the model answers in text).

        The rule, needing no list of names: an offered tool that is not one of the
        task's tools (:attr:`tools`), that the script never calls, and that has a
        required text property (:func:`answer_field`) is the agent's answer tool
        (Inspect's ``submit(answer)``, an agent's ``final_answer``, …). When several
        are, the last offered (frameworks add their answer tool after the task's)."""
        if self.tools is None:
            return None
        known = self.tools | _call_names(self.scripts[model].steps)
        candidates = [(name, f) for name, f in choice.answer_fields
                      if name not in known and name in choice.offered]
        return candidates[-1] if candidates else None

    def act(self, model: str, turn: int, results: Sequence[Any], seen: str = "",
            choice: ToolChoice | None = None, calls_made: int = 0) -> Action:
        """The scripted model's action on assistant turn ``turn``, obeying ``choice``.

        ``calls_made`` is the number of tool calls the assistant already made in the
        conversation (what a script played one call per turn has reached). With
        :attr:`calls_need_tools`, a request that offers no tools gets no calls (``choice``
        as ``none``; a simulator that passes no ``choice`` does not say what was
        offered). An answer goes through the agent's answer tool when the request offers
        one and allows calls (:meth:`answer_tool`). Raises KeyError for an unknown
        model, ScriptError when the script cannot go on.
        """
        script = self.scripts[model]
        if (self.calls_need_tools and choice is not None and not choice.offered
                and choice.mode != "none"):  # (no choice: the API's offer is not known)
            choice = ToolChoice("none", None, choice.parallel)
        choice = choice or AUTO
        # A conversation that carries fewer tool results than the calls made so far (by the
        # assistant, or by the script's steps before this turn: a client that keeps the
        # model's calls and their results as plain text, outside tool-call items and tool
        # messages) is valid for the API: the scripted model reads what it got, and a field
        # the results it got cannot fill is written ``?`` (as for results not shaped like
        # the lesson's), instead of a script error.
        scripted = sum(len(script.steps[k].get("calls", ()))
                       for k in range(min(turn, len(script.steps))))
        lenient = True if len(results) < max(calls_made, scripted) else None
        if choice.parallel:
            action = script.action(turn, self.params, self.question, results, seen,
                                   lenient=lenient)
        else:
            # a client that keeps its history as text echoes no call, but each call it
            # ran left a result: the results read count as calls made
            action = self._one_call_per_turn(script, max(calls_made, len(results)), results,
                                             seen, lenient)
        answer_tool = self.answer_tool(model, choice) if choice.mode != "none" else None
        if action.text is not None and answer_tool is not None and (
                choice.mode in ("auto", "required") or choice.name == answer_tool[0]):
            # the agent asks for the answer through its answer tool (Inspect's react()
            # prompts so): the scripted model gives it there, as one call
            return _answer_call(answer_tool, action.text)
        action = choice.apply(action, script, turn, self.params, self.question, results, seen)
        if action.text is not None and answer_tool is not None:
            return _answer_call(answer_tool, action.text)
        return action

    def _one_call_per_turn(self, script: Script, calls_made: int, results: Sequence[Any],
                           seen: str, lenient: bool | None = None) -> Action:
        """The script played one call per turn: the step that ``calls_made`` reaches,
        and in it the first call not made yet (an answer step is played as it is)."""
        left, step = calls_made, 0
        while True:
            action = script.action(step, self.params, self.question, results, seen,
                                   lenient=lenient)
            if action.text is not None or left < len(action.calls):
                return action if action.text is not None else Action(
                    calls=(action.calls[left],))
            left -= len(action.calls)
            step += 1

    def resolve(self, model: str) -> str:
        """The answer's ``model`` for a request for ``model`` (KeyError when not served)."""
        self.scripts[model]
        return self.answer_names.get(model, model)


@dataclass(frozen=True)
class ToolChoice:
    """What a request lets the scripted model do with its tools, neutral across APIs.

    ``mode``: ``auto`` (the script decides), ``none`` (no call: the model answers),
    ``required`` (at least one call), ``tool`` (a call to ``name``); ``parallel``: False
    when the request allows one call per turn (Responses / Chat ``parallel_tool_calls:
    false``, Messages ``disable_parallel_tool_use: true``); ``offered``: the names of
    the tools the request offers, in order.

    How the scripted model obeys (:meth:`apply`):

    * ``none`` — a step with calls is replaced by the script's next answer (rendered
      leniently: a field the results cannot fill yet is written ``?``); a script with no
      answer ahead (``bucle``) answers with empty text;
    * ``required`` — an answer step is replaced by the calls of the latest calls step
      before it (the model calls again instead of answering; the loop's repeated-call
      guard sees them); a script without a calls step calls the first offered tool with
      ``{}``;
    * ``tool`` — only the step's calls to ``name`` are kept; when it has none, the
      script's first call to ``name`` in any step, else ``name`` with ``{}``;
    * ``parallel`` False — at most one call per turn: the script's calls are played one
      per turn, in order (:meth:`ScriptedPolicy.act`), and a forced choice keeps its
      first call.
    """

    mode: str = "auto"
    name: str | None = None
    parallel: bool = True
    offered: tuple[str, ...] = ()
    #: (name, property) of each offered tool with a required text property
    #: (:func:`answer_fields`): the candidates for the agent's answer tool.
    answer_fields: tuple[tuple[str, str], ...] = ()

    def apply(self, action: Action, script: Script, turn: int, params: Mapping[str, Any],
              question: str, results: Sequence[Any], seen: str) -> Action:
        """``action`` (what the script does on ``turn``) as this choice lets it be."""
        if self.mode == "none" and action.text is None:
            action = self._next_answer(script, turn, params, question, results, seen)
        elif self.mode == "required" and action.text is not None:
            action = self._earlier_calls(script, turn, params, question, results, seen)
        elif self.mode == "tool" and self.name is not None:
            kept = tuple(c for c in action.calls if c.name == self.name)
            action = Action(calls=kept) if kept else self._call_to(
                self.name, script, params, question, results, seen)
        if not self.parallel and len(action.calls) > 1:
            action = Action(calls=action.calls[:1])
        return action

    @staticmethod
    def _next_answer(script: Script, turn: int, params: Mapping[str, Any], question: str,
                     results: Sequence[Any], seen: str) -> Action:
        for k in range(turn, len(script.steps)):
            step = script.step_at(k, seen)
            if "answer" in step:
                return script.play(step, k, params, question, results, lenient=True)
        return Action(text="")

    def _earlier_calls(self, script: Script, turn: int, params: Mapping[str, Any],
                       question: str, results: Sequence[Any], seen: str) -> Action:
        for k in range(min(turn, len(script.steps)) - 1, -1, -1):
            step = script.step_at(k, seen)
            if "calls" in step:
                return script.play(step, k, params, question, results, lenient=True)
        first = self.offered[0] if self.offered else None
        return Action(calls=(ScriptedCall(first, {}),)) if first else Action(text="")

    @staticmethod
    def _call_to(name: str, script: Script, params: Mapping[str, Any], question: str,
                 results: Sequence[Any], seen: str) -> Action:
        for k, step in enumerate(script.steps):
            step = script.step_at(k, seen)
            if "calls" in step and any(c.get("name") == name for c in step["calls"]):
                calls = script.play(step, k, params, question, results, lenient=True).calls
                return Action(calls=tuple(c for c in calls if c.name == name)[:1])
        return Action(calls=(ScriptedCall(name, {}),))


AUTO = ToolChoice()


def _call_names(steps: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The tool names a script's ``steps`` call (both arms of a branch), as written."""
    names: set[str] = set()
    for step in steps:
        if "branch" in step:
            names |= _call_names((step["branch"]["then"], step["branch"]["else"]))
        names |= {c["name"] for c in step.get("calls", ()) if isinstance(c.get("name"), str)}
    return frozenset(names)


def _answer_call(tool: tuple[str, str], text: str) -> Action:
    """An answer given as one call to the agent's answer tool ``(name, property)``."""
    name, prop = tool
    return Action(calls=(ScriptedCall(name, {prop: text}),))
