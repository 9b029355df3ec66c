"""A local model behind a real OpenAI-compatible server: ``transformers serve``.

The ``openai_chat`` provider talks to any server that speaks Chat Completions; this
module prepares and starts one that the project did not write, for the tests and the
overlay ``workflow/configs/transformers_serve.yaml`` (docs/simulators.md, "Chat
Completions and any OpenAI-compatible server"):

* :func:`prepare` makes a model folder whose chat template renders tools. SmolLM2's own
  template is plain ChatML and renders none, so the server would drop the tool
  definitions. The prepared folder is a COPY (the weights are symbolic links to the
  original's) whose tokenizer carries the lesson's Hermes tool template (Qwen2.5's, which
  the lesson prints: the tools as JSON lines between ``<tools>`` tags, calls as
  ``<tool_call>{...}</tool_call>``, results as ``<tool_response>`` blocks) and the
  matching ``response_template`` with which ``transformers serve`` parses the calls out
  of the generated text (the one it uses for Qwen2 models, whose markers SmolLM2 shares).
  A model whose template already renders tools is served as it is.
* :class:`TransformersServe` runs ``transformers serve`` on a loopback port in a child
  process (``with TransformersServe(folder) as srv: srv.base_url``), waits for
  ``/health`` and stops it (that process only) on exit.

``python -m reactlab.dev.serving prepare --model data/models/SmolLM2-135M-Instruct --out
data/models/SmolLM2-135M-Instruct-tools`` prepares a folder from the command line;
``python -m reactlab.dev.serving serve --model FOLDER --port 8011`` serves it
(``--dtype bfloat16``, ``--continuous-batching``, ``--threads N``: see
:class:`TransformersServe`; ``workflow/configs/bfcl_serve.yaml`` runs the whole BFCL
suite against it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from reactlab.core.errors import InternalError, ModelNotFound

#: The Hermes tool template of the lesson (Qwen2.5-Instruct's chat template), with
#: SmolLM2's own default system prompt where a conversation brings none.
HERMES_TEMPLATE = (
    "{%- set default_system = 'You are a helpful AI assistant named SmolLM, trained b"
    "y Hugging Face' %}\n"
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- default_system }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with t"
    "he user query.\\n\\nYou are provided with function signatures within <tools></to"
    "ols> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with fun"
    "ction name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>"
    "\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</to"
    "ol_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }"
    "}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loo"
    "p.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|"
    ">' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\""
    ") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

#: Files of a model folder linked (not copied) into the prepared folder.
_LINKED = ("config.json", "generation_config.json", "model.safetensors",
           "model.safetensors.index.json")
_PROBE_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "sonda_herramienta", "description": "d",
    "parameters": {"type": "object", "properties": {}}}}
_PROBE = [{"role": "user", "content": "x"}]


def renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template puts the tools it is given into the prompt."""
    try:
        text = tokenizer.apply_chat_template(_PROBE, tools=[_PROBE_TOOL], tokenize=False,
                                             add_generation_prompt=True)
    except Exception:  # a template that chokes on tools does not render them
        return False
    return _PROBE_TOOL["function"]["name"] in text


def response_template() -> dict[str, Any]:
    """The ``response_template`` ``transformers serve`` parses Hermes / Qwen2 output with."""
    # lazy: heavy (transformers)
    from transformers.cli.serving.utils import _RESPONSE_TEMPLATE_FALLBACKS

    return next(v for k, v in _RESPONSE_TEMPLATE_FALLBACKS.items() if "qwen2" in k)


def prepare(model: str | Path, out: str | Path) -> Path:
    """The folder to serve ``model`` from with tool calling: ``model`` itself when its
    template renders tools, else ``out``, a copy with the Hermes template (weights
    linked). ``out`` is rebuilt when it exists (its files are all derived)."""
    from transformers import AutoTokenizer  # lazy: heavy (transformers)

    model, out = Path(model), Path(out)
    if not (model / "config.json").is_file():
        raise ModelNotFound(f"{model} is not a model folder (no config.json); build it "
                                "with `snakemake data/models/SmolLM2-135M-Instruct` or "
                                "`python -m reactlab convert-model`")
    tokenizer = AutoTokenizer.from_pretrained(model)
    if renders_tools(tokenizer):
        return model
    out.mkdir(parents=True, exist_ok=True)
    for name in _LINKED:
        target, link = (model / name).resolve(), out / name
        if link.is_symlink() or link.exists():
            link.unlink()
        if target.is_file():
            link.symlink_to(target)
    tokenizer.chat_template = HERMES_TEMPLATE
    tokenizer.response_template = response_template()
    tokenizer.save_pretrained(out)
    check = AutoTokenizer.from_pretrained(out)
    if not renders_tools(check) or check.response_template is None:
        raise InternalError(f"{out}: the prepared tokenizer does not render tools")
    (out / "reactlab_tools.json").write_text(json.dumps(
        {"source": str(model), "template": "hermes (Qwen2.5)",
         "response_template": "qwen2"}, indent=1) + "\n")
    return out


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on ``host`` (loopback)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LoopbackServer:
    """A server on ``host:port`` (loopback) in a child process: :meth:`command` starts it,
    :meth:`start` waits until ``health_path`` answers 200, :meth:`stop` ends that process
    only. ``threads`` caps the child's OpenMP / MKL threads; its output goes to ``log`` (a
    file) when given. ``with Server(...) as srv: srv.base_url``."""

    #: What the errors call it.
    name: str = "the server"
    #: A GET that answers 200 once the server takes requests.
    health_path: str = "/health"

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None,
                 threads: int = 1, startup_timeout: float = 180.0,
                 log: str | Path | None = None) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.threads = threads
        self.startup_timeout = startup_timeout
        self.log = Path(log) if log is not None else None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What the ``openai_chat`` backend's ``base_url`` is set to."""
        return self.root + "/v1"

    def command(self) -> list[str]:
        raise NotImplementedError

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.root + self.health_path, timeout=2) as r:
                status: int = r.status
                return status == 200
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> Self:
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads),
               "MKL_NUM_THREADS": str(self.threads), "TOKENIZERS_PARALLELISM": "false",
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        out: IO[bytes] | int = subprocess.DEVNULL
        with contextlib.ExitStack() as stack:  # the log file closes once the child has it
            if self.log is not None:
                out = stack.enter_context(self.log.open("ab"))
            self.process = subprocess.Popen(self.command(), env=env, stdout=out,
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise InternalError(f"{self.name} exited with "
                                        f"{self.process.returncode}"
                                        + (f" (log: {self.log})" if self.log else ""))
                if self._healthy():
                    return self
                time.sleep(0.5)
        except BaseException:  # an interrupt while it starts: the server goes too
            self.stop()
            raise
        self.stop()
        raise InternalError(f"{self.name} did not answer {self.health_path} within "
                           f"{self.startup_timeout:.0f} s")

    def stop(self, timeout: float = 15.0) -> None:
        """End the server: SIGTERM, and SIGKILL if it still runs ``timeout`` s later."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout)
        self.process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class TransformersServe(LoopbackServer):
    """``transformers serve FOLDER`` on ``host:port`` (loopback), in a child process.

    Requests must name ``model`` exactly, as the string given here; ``device`` cpu,
    torch limited to ``threads``. ``dtype`` is the weights' dtype on the server (default
    float32, the local backends' default; ``bfloat16`` is what a ``dtype: bfloat16`` local
    backend such as ``workflow/configs/bfcl_bf16.yaml``'s computes in, for a comparison
    in the same dtype). ``continuous_batching`` starts the server with
    ``--continuous-batching`` (paged attention; concurrent requests decoded together:
    what a suite's ``max_in_flight`` is for). Its paged KV cache holds ``cb_blocks``
    blocks of 256 tokens (``--cb-num-blocks``; default 128: 32,768 tokens, ≈ 0.75 GB for
    SmolLM2-135M in bfloat16): left to itself, transformers sizes the cache from 90 % of
    the free memory, which on a CPU is the machine's RAM (12 GB and growing on a 24 GB
    machine, measured), and every decoding step paid for it. The child's output goes to
    ``log`` (a file) when given.
    """

    name = "transformers serve"

    def __init__(self, model: str | Path, *, host: str = "127.0.0.1", port: int | None = None,
                 threads: int = 1, startup_timeout: float = 180.0,
                 log: str | Path | None = None, dtype: str = "float32",
                 continuous_batching: bool = False, cb_blocks: int = 128,
                 cb_batch_tokens: int | None = None) -> None:
        super().__init__(host=host, port=port, threads=threads,
                         startup_timeout=startup_timeout, log=log)
        self.model = str(model)
        self.dtype = dtype
        self.continuous_batching = continuous_batching
        self.cb_blocks = cb_blocks
        self.cb_batch_tokens = cb_batch_tokens

    def command(self) -> list[str]:
        exe = Path(sys.executable).with_name("transformers")
        return [str(exe), "serve", self.model, "--host", self.host, "--port", str(self.port),
                "--device", "cpu", "--dtype", self.dtype, "--log-level", "warning",
                *(["--continuous-batching", "--cb-num-blocks", str(self.cb_blocks)]
                  if self.continuous_batching else []),
                *(["--cb-max-batch-tokens", str(self.cb_batch_tokens)]
                  if self.continuous_batching and self.cb_batch_tokens else [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reactlab.dev.serving",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write a tool-aware copy of a model folder")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    s = sub.add_parser("serve", help="run transformers serve on loopback until Ctrl-C "
                       "(or SIGTERM)")
    s.add_argument("--model", required=True)
    s.add_argument("--port", type=int, default=8011)
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                   help="the weights' dtype on the server (default float32)")
    s.add_argument("--continuous-batching", action="store_true",
                   help="decode concurrent requests together (transformers serve's flag)")
    s.add_argument("--cb-blocks", type=int, default=128,
                   help="KV cache blocks of 256 tokens under --continuous-batching")
    s.add_argument("--cb-batch-tokens", type=int, default=None,
                   help="tokens per forward pass under --continuous-batching")
    s.add_argument("--log", default=None, help="the server's output goes to this file")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(prepare(args.model, args.out))
        return 0
    return serve_until_stopped(TransformersServe(
        args.model, port=args.port, threads=args.threads, log=args.log, dtype=args.dtype,
        continuous_batching=args.continuous_batching, cb_blocks=args.cb_blocks,
        cb_batch_tokens=args.cb_batch_tokens), args.model)


def serve_until_stopped(server: LoopbackServer, what: str) -> int:
    """Start ``server``, print ``serving {what} at {base_url}``, and wait until it exits,
    or until Ctrl-C, a TERM or a HUP, which stop it (the CLIs' ``serve``)."""
    # Ctrl-C, and a TERM or HUP too (a job manager's stop, a closed terminal), ends the
    # wait below with a clean exit that stops the server on its way out of the block
    # (while it starts, too: LoopbackServer.start); without this a TERM ended this
    # process and left the server running, and a shell's background job ignores SIGINT
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
    with server as srv:
        print(f"serving {what} at {srv.base_url}", flush=True)
        while srv.process is not None and srv.process.poll() is None:
            time.sleep(1)
    return 0

if __name__ == "__main__":
    sys.exit(main())
