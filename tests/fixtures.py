"""The shared test helpers: imported by test modules as `from fixtures import ...` (pytest puts tests/ on
the path: `pythonpath` in pyproject.toml). The pytest fixtures and hooks live in conftest.py; no test
module imports another test module.

Sections: paths and params; synthetic kernel timings; pilot records and a mutable function; the toy
tokenizer; the FSM tests' vocabulary and oracle; scratch pipelines; the headless browser (a minimal
DevTools client); small stage-output frames for the presentation tests."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from functools import cache
from pathlib import Path
from urllib.parse import urlparse

from analysis.latency.model import ModelKey, QuadraticAR, QuadraticPrefill

ROOT = Path(__file__).resolve().parents[1]
SHARED_HEP = ROOT.parent / "shared" / "data" / "humanevalpack"
SHARED_EDITS = ROOT.parent / "shared" / "data" / "edits"


# ---------------------------------------------------------------- paths and params

def params_with(**changes) -> dict:
    """The repository's params.yaml with dotted keys replaced (`spans.ci=0.9` as `**{"spans.ci": 0.9}`)."""
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for dotted, value in changes.items():
        node = params
        *parents, last = dotted.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return json.loads(json.dumps(params))


def sources_held(params: dict, model_path: Path) -> dict:
    """`params` with kernel.sources cut to those the latency model at `model_path` holds: tests that copy
    the committed model as a plain input may meet a source params.yaml names before `kernels fit` reran."""
    from analysis.latency.names import FIT_SOURCE, PAPER_SOURCE
    from analysis.latency.sources import load_fitted_models, measured_names

    held = set(measured_names(load_fitted_models(model_path))) | {FIT_SOURCE, PAPER_SOURCE}
    params["kernel"]["sources"] = [s for s in params["kernel"]["sources"] if s in held]
    return params


def committed_bytes(path: str, rev: str = "HEAD") -> bytes | None:
    """`path` (repository-relative) as committed at `rev` in this checkout; None without git or when not
    committed there. Tests that check physics or timing on machine-dependent outputs read these, never the
    workspace file: a user's own `dvc repro` rewrites the workspace with this machine's (noisy) timings."""
    try:
        done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


# ---------------------------------------------------------------- synthetic kernel timings (known curves)

KERNEL_NS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
KERNEL_KEY = ModelKey("m", "random", "float32", "cpu", "eager")
TRUE_AR = QuadraticAR(a=0.02, b=2e-6)
TRUE_PREFILL = QuadraticPrefill(p0=0.03, p1=1.5e-3, p2=4e-6, p3=2e-7)


def raw_from(ar_curve, prefill_curve, contexts, repeats=3, noise=0.01, seed=0, baselines=("eager",)):
    """Raw timings (the profiler's schema) generated from known curves, with multiplicative noise."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    rows = []
    for c in contexts:
        for n in KERNEL_NS:
            for r in range(repeats):
                for baseline in baselines:
                    t = float(ar_curve.evaluate(n, c)) * (1 + noise * rng.standard_normal())
                    rows.append(("m", "random", "float32", "cpu", "ar", baseline, c, n, r, t))
                t = float(prefill_curve.evaluate(n, c)) * (1 + noise * rng.standard_normal())
                rows.append(("m", "random", "float32", "cpu", "prefill", "eager", c, n, r, t))
    return pl.DataFrame(rows, orient="row", schema={
        "model": pl.String, "weights": pl.String, "dtype": pl.String, "device": pl.String, "method": pl.String,
        "baseline": pl.String, "context": pl.Int64, "n": pl.Int64, "repeat": pl.Int64, "seconds": pl.Float64})


def method_points(summary, method, baseline="eager"):
    """One method's rows of a kernel summary (the AR rows of one baseline)."""
    import polars as pl

    frame = summary.filter(pl.col("method") == method)
    return frame.filter(pl.col("baseline") == baseline) if method == "ar" else frame


# ---------------------------------------------------------------- pilot records and a mutable function

def pilot_record(**kw) -> dict:
    """One pilot evaluation record (the stage's RECORD_SCHEMA keys) with `kw` replaced."""
    base = {"phase": "after", "seed": 0, "split": "heldout", "mode": "program", "case_id": "c/0", "kind": "k",
            "position": 0, "paired": True, "budget": 10, "error": None, "exact_match": True, "valid": True,
            "stopped": "eos", "copy_coverage": 0.5, "seconds": 1.0, "program_tokens": 5}
    return {**base, **kw}


# a function every bug-mutation operator finds a site in (the bugmutate and pilot-data tests)
MUTABLE_FUNCTION = '''def window(items, size, step):
    """Slide a window over items."""
    out = []
    i = 0
    while i + size <= len(items) and step > 0:
        out.append(items[i:i + size])
        i += step
    if not out or size == 1:
        return items
    return out
'''


# ---------------------------------------------------------------- the one toy tokenizer

class ToyTokenizer:
    """The toy tokenizer every test builds on: token ids spell `pieces` (bytes); `eos` spells nothing.

    It offers the slice of a tokenizer that the FSM uses (`vocab_size`, `piece`, `added_token_ids`) and
    the HF-style call the e2e stage uses (`tok(text)["input_ids"]`, one id per byte: the first 256
    pieces must then be the bytes themselves, as in `ToyTokenizer.bytes_then`).
    """

    added_token_ids = frozenset()

    def __init__(self, pieces: list[bytes], eos: int):
        if not 0 <= eos < len(pieces) or pieces[eos] != b"":
            raise ValueError(f"toy tokenizer: the EOS id {eos} must hold an empty piece")
        self.pieces, self.eos = list(pieces), eos
        self.vocab_size = len(self.pieces)

    @classmethod
    def words_then_eos(cls, words: list[bytes]) -> "ToyTokenizer":
        """A hand-made vocabulary; the last id is EOS."""
        return cls([*words, b""], eos=len(words))

    @classmethod
    def bytes_then(cls, extra: list[bytes] = ()) -> "ToyTokenizer":
        """Byte level: ids 0..255 are the bytes, 256 is EOS, then the multi-byte `extra` pieces."""
        return cls([bytes([b]) for b in range(256)] + [b""] + list(extra), eos=256)

    def piece(self, token_id: int) -> bytes:
        return self.pieces[token_id]

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": self.encode(text)}


def toy_model_tokenizer(extra: list[bytes] = (b'"/><', b'"/>')):
    """The byte-level toy as a kernels_profile ModelTokenizer (the decoder's and the pilot's tests).
    The default `extra` pieces: one closes a directive and starts the next op at once."""
    from kernels_profile.runtime.hf import ModelTokenizer

    tok = ToyTokenizer.bytes_then(list(extra))
    return ModelTokenizer("toy", tok, tok.encode, None, (tok.eos,))


def scripted_lm(tiny, tok, program, source: str, instruction: str):
    """The tiny model scripted to write `program` greedily (the decoder's tests): (LoadedModel, tok,
    prompt ids, the expected TrainingSequence). The model's `calls` records each forward's length."""
    from kernels_profile.decode.sequence import program_sequence
    from kernels_profile.runtime.hf import PROGRAM_TEMPLATE, prompt_ids
    from kernels_profile.runtime.models import LoadedModel

    prompt = prompt_ids(tok, PROGRAM_TEMPLATE, source, instruction)
    expected = program_sequence(tok, prompt, program, source)
    model = _scripted_class()(tiny.model, expected.ids)
    return LoadedModel("tiny-scripted", model, tiny.config, "random", "float32", "cpu"), tok, prompt, expected


@cache
def _scripted_class():
    import torch

    from kernels_profile.runtime.models import cache_kwarg

    class Scripted(torch.nn.Module):
        """The tiny model with a large bonus on the next token of an expected sequence (by position), so
        that greedy decoding writes a chosen program; it records the length of every forward."""

        def __init__(self, inner, expected, bonus=50.0):
            super().__init__()
            self.inner, self.expected, self.bonus, self.calls = inner, list(expected), bonus, []

        def get_input_embeddings(self):
            return self.inner.get_input_embeddings()

        def forward(self, input_ids, cache=None, **kwargs):
            seen = cache.get_seq_length() if cache is not None else 0
            out = self.inner(input_ids=input_ids, **{cache_kwarg(self.inner): cache}, **kwargs)
            nxt = seen + input_ids.shape[1]
            if nxt < len(self.expected):
                out.logits[0, -1, self.expected[nxt]] += self.bonus
            self.calls.append(int(input_ids.shape[1]))
            return out

    return Scripted


# ---------------------------------------------------------------- the FSM tests' vocabulary and oracle

FSM_LINES = 12  # the line count the FSM tests' programs may copy from


def fsm_reference(data, limits=None) -> bool:
    """The parser's verdict, with the copy-range check; bytes that are not UTF-8 are rejected."""
    from analysis.errors import ProgramError
    from analysis.grammar.program import parse

    limits = {"lines": FSM_LINES} if limits is None else limits
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    try:
        program = parse(data)
    except ProgramError:
        return False
    return all(op.unit in limits and 1 <= op.start <= op.end <= limits[op.unit] for op in program.copies)


FSM_WORDS = ["<", "copy", " lines=\"", "<copy lines=\"", "1", "2", "0", "12", "-", "\"/>", "\"", "/>", "<gen>",
         "</gen>", "</", "gen", ">", "a", " b", "\n", "&lt;", "&", "x</gen>", "<g", "<c", "e", "n", "&amp;",
         "lt;", "&lt;copy", "é", "中"]
# every single byte is a token too, as in byte-level BPE, so no live state is stuck
FSM_VOCAB = [w.encode() for w in FSM_WORDS] + [bytes([b]) for b in range(256)
                                               if bytes([b]) not in {w.encode() for w in FSM_WORDS}]
FSM_EOS = len(FSM_VOCAB)  # ToyTokenizer.words_then_eos(FSM_VOCAB) puts EOS last


def profile_spec(**changes):
    """The kernel profile's ProfileSpec as params.yaml gives it, with `changes`; torch's own thread count
    unless `threads` is given (what the tests measured with before the spec lost its code defaults)."""
    from dataclasses import replace

    import yaml

    from kernels_profile.stages.profile import settings

    spec = settings(yaml.safe_load((ROOT / "params.yaml").read_text())).spec
    return replace(spec, **{"threads": None, **changes})


# ---------------------------------------------------------------- scratch pipelines

def write_scratch_shared(top: Path, hep_dir: Path, python_cases: int) -> None:
    """A `shared/data` beside a scratch repository: the first `python_cases` HumanEvalPack Python records,
    an empty git folder (declared by the corpora stage; no bundle mined) and the two edit-benchmark files the
    corpora stage declares, as small files shaped like them (a scratch run sets `corpora.datasets: []`)."""
    data = top / "shared" / "data" / "humanevalpack"
    data.mkdir(parents=True)
    lines = (hep_dir / "python.jsonl").read_text().splitlines()[:python_cases]
    (data / "python.jsonl").write_text("\n".join(lines) + "\n")
    (top / "shared" / "data" / "git").mkdir()
    (top / "shared" / "data" / "git" / "README").write_text("empty\n")
    write_field_benchmarks(top / "shared" / "data" / "edits")


# ---------------------------------------------------------------- the field's edit benchmarks, as small files

# Records shaped like ../shared/data/edits (its README): CanItEdit's integer ids, both instructions and a nested
# taxonomy; EditEval's own "EditEval/<n>" task ids, a `context` some records lack, a nested META.
CANITEDIT_RECORDS = (
    {"id": 10, "name": "csv_header", "full_name": "10_csv_header",
     "before": "import csv\n\ndef rows(path):\n    with open(path) as f:\n        return list(csv.reader(f))",
     "after": "import csv\n\ndef rows(path):\n    with open(path) as f:\n        return list(csv.reader(f))\n\n"
              "def header(path):\n    return rows(path)[0]",
     "tests": "assert True", "instruction_descriptive": "Add a function `header` returning the first row.",
     "instruction_lazy": "add header", "taxonomy": {"change_kind": "adaptive", "topic": "Data"}},
    {"id": 11, "name": "fix_sum", "full_name": "11_fix_sum",
     "before": "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s",
     "after": "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s",
     "tests": "assert total([1]) == 1", "instruction_descriptive": "Fix `total` so it adds the items.",
     "instruction_lazy": "fix total", "taxonomy": {"change_kind": "corrective", "topic": "Math"}},
)
EDITEVAL_RECORDS = (
    {"task_id": "EditEval/0", "instruction": "Rename `f` to `g`.", "context": "",
     "input": "def f(a):\n    return a + 1\n", "output": "def g(a):\n    return a + 1\n", "test": "", "META": {"author": "kx"}},
    {"task_id": "EditEval/2", "instruction": "Use print() calls.", "input": 'print "hi"\nprint "bye"',
     "output": 'print("hi")\nprint("bye")', "test": "", "META": {"author": "qs"}},
)
CANITEDIT_FIELDS = {"source": "before", "target": "after", "instruction": "instruction_descriptive", "case_id": "id"}
EDITEVAL_FIELDS = {"source": "input", "target": "output", "instruction": "instruction", "case_id": "task_id"}


def write_jsonl_records(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def write_field_benchmarks(folder: Path) -> list[dict]:
    """canitedit_test.jsonl and edit_eval.jsonl in `folder`, shaped like the real files: the corpora.datasets
    entries that read them as the shipped params read the real ones (names, language, fields, sha256 pins)."""
    import hashlib

    entries = []
    for file, name, records, fields in (("canitedit_test.jsonl", "CanItEdit", CANITEDIT_RECORDS, CANITEDIT_FIELDS),
                                        ("edit_eval.jsonl", "EditEval", EDITEVAL_RECORDS, EDITEVAL_FIELDS)):
        path = write_jsonl_records(folder / file, records)
        entries.append({"dataset": str(path), "name": name, "language": "python",
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "fields": dict(fields)})
    return entries


# small analysis-stage settings for a scratch corpora -> programs -> spans -> ... build (the `optimal`,
# perturbation and shards tests)
SCRATCH_STAGE_PARAMS = {
    "corpora.humanevalpack.languages": ["python"], "corpora.humanevalpack.framings": ["body"],
    "corpora.probeedit.enabled": False, "corpora.commits": [], "corpora.datasets": [],
    "spans.bootstrap_resamples": 0, "bounds.bootstrap_resamples": 20, "kernel.sources": ["fit", "paper"],
    "kernel.baselines": ["eager"], "kernel.latency_form": "quadratic",
    "optimal.bootstrap_resamples": 20, "optimal.framings": ["body"],
    "perturb.seeds": 1, "perturb.rates": [0.0, 0.5, 1.0], "perturb.levels": ["line"],
    "perturb.kinds": ["start", "shift"],
}


def write_scratch_params(folder: Path, **changes) -> None:
    """params.yaml in a scratch folder: the repository's with SCRATCH_STAGE_PARAMS and `changes` (dotted keys)."""
    import yaml

    (folder / "params.yaml").write_text(yaml.safe_dump(params_with(**{**SCRATCH_STAGE_PARAMS, **changes})))


# Three small cases of two corpora for the analysis stages' unit tests: a one-line change, a case whose
# target shares no line with its source, and one that copies a line out of order.
TOY_CASES = (
    ("T/1", "Toy", "python", "body", "def f(x):\n    y = x + 1\n    return y\n",
     "def f(x):\n    y = x + 2\n    return y\n"),
    ("T/2", "Toy", "python", "body", "a = 1\n", "print('hello')\n"),
    ("U/1", "Other", "python", "body", "one\ntwo\nthree\n", "three\none\ntwo\nfour\n"),
)


def toy_cases():
    """TOY_CASES as analysis.corpora.cases.Case values."""
    from analysis.corpora.cases import Case

    return [Case(*row) for row in TOY_CASES]


def toy_program_table(tokenizer, token_min_copy: int = 1):
    """The oracle programs of the toy cases with each case's source and target joined on (the frame
    `analysis.parallel.tables.joined_programs` reads from disk), built in memory."""
    from analysis.corpora.cases import cases_frame
    from analysis.oracle.programs import oracle_programs

    cases = toy_cases()
    programs = oracle_programs(cases, tokenizer, token_min_copy)
    texts = cases_frame(cases).select("case_id", "framing", "source", "target")
    return programs.join(texts, on=["case_id", "framing"], how="left", maintain_order="left")


def params_model_key(form="quadratic"):
    """The latency ModelKey of params.yaml's kernel model on random weights, eager baseline."""
    import yaml

    from analysis.latency.model import ModelKey

    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    return ModelKey(base["kernel"]["model"], "random", base["kernel"]["dtype"], base["kernel"]["device"], "eager")


def write_model(folder, model) -> None:
    """`model` (a LatencyModel) as the scratch folder's committed latency model."""
    from analysis.latency.model import to_document

    path = folder / "reports/kernels/latency_model.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_document([model], "synthetic", [])))


@cache
def one_context_model():
    """t_step = 1 ms; T_prefill(n) = 3 ms + 0.02 ms * n: a 1-token copy costs more than decoding it."""
    from analysis.latency.model import LatencyModel, QuadraticAR, QuadraticPrefill

    return LatencyModel(params_model_key(), "quadratic", QuadraticAR(1e-3, 0.0),
                        QuadraticPrefill(3e-3, 2e-5, 0.0, 0.0), (1.0, 512.0), (256.0,))




# ---------------------------------------------------------------- the headless browser

BROWSER_WIDTH = 1280


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


# ---------------------------------------------------------------- a minimal websocket client (RFC 6455)


class WebSocket:
    def __init__(self, url: str, timeout: float = 30.0):
        parts = urlparse(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket handshake: connection closed")
            response += chunk
        if b" 101 " not in response.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {response[:200]!r}")
        self.buffer = response.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            header += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def recv(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            opcode, n = first & 0x0F, second & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            payload = self._read(n)
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            message += payload
            if first & 0x80:
                return message.decode("utf-8")


class Browser:
    """One headless Chromium and one page target, spoken to over the DevTools protocol."""

    def __init__(self, binary: str, offline: bool = False):
        self.profile = tempfile.mkdtemp(prefix="copydecode-chromium-")
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={BROWSER_WIDTH},900",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._port()
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id, self.events = 0, []
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        if offline:  # the network off, as on a machine with none: every http(s) request fails
            self.call("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1,
                      uploadThroughput=-1)
        self.call("Emulation.setDeviceMetricsOverride", width=BROWSER_WIDTH, height=900, deviceScaleFactor=1, mobile=False)

    def _port(self) -> int:
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if "DevTools listening on ws://" in line:
                return urlparse(line.split("listening on ")[1].strip()).port
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            message = json.loads(self.ws.recv())
            self.events.append(message)
            if message.get("method") == event:
                return
        raise TimeoutError(event)

    def open(self, url: str) -> list[dict]:
        """Load `url` and return the events it caused."""
        self.events = []
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        self.call("Runtime.evaluate", expression="1", awaitPromise=True)  # drain what the load queued
        return self.events

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"]["value"]

    def screenshot(self, path: Path, first_px: int | None = None) -> None:
        """The page (at most 8,000 px of it), or only its first `first_px` pixels: what a reader sees first."""
        height = first_px or int(self.evaluate("document.documentElement.scrollHeight"))
        self.call("Emulation.setDeviceMetricsOverride", width=BROWSER_WIDTH, height=min(height, 8000), deviceScaleFactor=1,
                  mobile=False)
        shot = self.call("Page.captureScreenshot", format="png")
        self.call("Emulation.setDeviceMetricsOverride", width=BROWSER_WIDTH, height=900, deviceScaleFactor=1, mobile=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def page_problems(events: list[dict], url: str) -> dict[str, list[str]]:
    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    errors = [e["params"]["exceptionDetails"].get("text", "exception") for e in events
              if e.get("method") == "Runtime.exceptionThrown"]
    errors += [" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"])
               for e in events if e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")]
    errors += [e["params"]["entry"]["text"] for e in events
               if e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"]
    outside = [r for r in requests if r != url and not r.startswith("data:")]
    return {"outside requests": outside, "console errors": errors}



# ---------------------------------------------------------------- presentation: small stage-output frames

ATTACK = "<img src=x onerror=alert(1)>"  # a hostile value every rendered page must escape


def coverage_rows():
    """A coverage.csv: line and token coverage per (corpus, framing), the two framings' pools included."""
    import polars as pl

    rows = []
    for corpus, framing, line, token in (("HEvalFix-Py", "body", 0.74, 0.97), ("HEvalFix-Py", "decl", 0.80, 0.98),
                                         ("ProbeEdit-S", "unit", 0.98, 0.999), ("CommitEdits-click", "file", 0.96, 0.99),
                                         ("pooled", "body", 0.9, 0.99), ("pooled", "decl", 0.91, 0.99)):
        for level, value in (("line", line), ("token", token)):
            rows.append({"corpus": corpus, "framing": framing, "level": level, "n_cases": 10, "coverage": value,
                         "ci_low": value - 0.01, "ci_high": value + 0.005})
    return pl.DataFrame(rows)


def bound_rows(values: dict[tuple[str, str], float], cases: dict[str, int] | None = None):
    """A bounds.csv in the kernel-source format: line/ideal rows for (kernel_source, corpus) -> bound."""
    import polars as pl

    cases = cases or {}
    rows = []
    for (source, corpus), bound in values.items():
        framing = {"ProbeEdit-S": "unit", "CommitEdits-click": "file"}.get(corpus, "body")
        poolings = ["ratio_of_sums", "mean_of_corpora"] if corpus == "pooled" else ["corpus"]
        for pooling in poolings:
            rows.append({"level": "line", "corpus": corpus, "framing": framing, "variant": "ideal",
                         "n_cases": cases.get(corpus, 164), "bound": bound, "ci_low": bound * 0.9, "ci_high": bound * 1.1,
                         "coverage": 0.9, "pooling": pooling, "extrapolated_spans": 0, "kernel_source": source,
                         "baseline": "eager" if source == "fit" else "paper (A100, bf16)"})
    return pl.DataFrame(rows)


def write_bound_tables(tmp_path: Path, bounds, coverage=None) -> Path:
    """bounds.csv and coverage.csv (coverage_rows() unless given) under tmp_path's tables folder."""
    from analysis.layout import TABLES

    tables = tmp_path / TABLES
    tables.mkdir(parents=True, exist_ok=True)
    bounds.write_csv(tables / "bounds.csv")
    (coverage if coverage is not None else coverage_rows()).write_csv(tables / "coverage.csv")
    return tables


def run_environment_sidecar(reference: list[float], threshold: float = 0.15, roofline: dict | None = None) -> dict:
    """A sidecar as kernels_profile.measure.session.environment_record writes it, from the contention module's own types."""
    from kernels_profile.measure.contention import Drift, RunEnvironment

    drift = Drift.of(reference, threshold)
    run = RunEnvironment(run_id="r1", started_at=1_700_000_000.0, ended_at=1_700_000_100.0,
                         machine={"cpu_model": "Test CPU", "cpu_avx2": True, "cpu_avx512f": False},
                         load_before=(0.5, 0.4, 0.3), load_after=(1.5, 0.6, 0.4), reference_samples_s=tuple(reference),
                         drift=drift).to_json()
    run["roofline"] = roofline
    return {"machine": {"cpu_model": "Test CPU", "cpu_avx2": True, "cpu_avx512f": False, "cpu_avx512_bf16": False,
                        "cpu_amx_tile": True, "logical_cores": 2, "usable_cores": 2, "torch_threads": 2},
            "noisy_drift": threshold, "noisy": drift.noisy, "pairs": 4, "noisy_pairs": ["p1"] if drift.noisy else [],
            "max_pair_drift": drift.drift, "median_pair_drift": drift.drift / 2, "load1": {"min": 0.5, "max": 1.5},
            "runs": [run]}


ROOFLINE = {"stream_gbps": 10.0, "matmul_f32_gflops": 120.0, "matmul_f32_size": 1024, "matmul_bf16_gflops": 4.0,
            "matmul_bf16_size": 128, "ridge_flops_per_byte": 12.0}


def kernel_speedups(top: float):
    """A kernel speedup table whose strongest float32 speedup at the largest n is `top`."""
    import polars as pl

    return pl.DataFrame({"n": [8, 512, 512], "dtype": ["float32"] * 3, "is_strongest": [True, True, False],
                         "speedup": [3.0, top, top / 2], "baseline": ["static", "static", "eager"]})


def perturbation_rows(em_of: dict):
    """A perturbation.csv at line level: per corpus of the paper (and CommitEdits-click) EM by rate as em_of[corpus](rate)."""
    import polars as pl

    corpora = {"HEvalFix-Py": ("body", 164), "HEvalFix-JS": ("body", 164), "ProbeEdit-S": ("unit", 154),
               "CommitEdits-click": ("file", 300)}
    rows = []
    for corpus, (framing, n) in corpora.items():
        for rate in (0.0, 0.5, 1.0):
            for kind in ("start", "end"):
                em = em_of[corpus](rate)
                rows.append({"level": "line", "kind": kind, "rate": rate, "corpus": corpus, "framing": framing,
                             "em": em, "em_min": em, "em_max": em, "invalid": 0.0, "no_copy": em_of[corpus](1.0),
                             "n_cases": n, "seeds": 3})
        rows.append({"level": "line", "kind": "start", "rate": 1.0, "corpus": corpus, "framing": "decl", "em": 0.9,
                     "em_min": 0.9, "em_max": 0.9, "invalid": 0.0, "no_copy": 0.9, "n_cases": n, "seeds": 3})
    rows.append({"level": "line", "kind": "start", "rate": 1.0, "corpus": "pooled", "framing": "body", "em": 0.5,
                 "em_min": 0.5, "em_max": 0.5, "invalid": 0.0, "no_copy": 0.0, "n_cases": 782, "seeds": 3})
    return pl.DataFrame(rows).filter(~((pl.col("framing") == "decl") & pl.col("corpus").is_in(["ProbeEdit-S", "CommitEdits-click"])))


# ---------------------------------------------------------------- the e2e stage: a fake executor

from dataclasses import dataclass  # noqa: E402

from analysis.rivals.families.copy import DECODED, IDEAL  # noqa: E402
from analysis.rivals.families.suffix import DEFAULTS  # noqa: E402
from analysis.rivals.methods import Method  # noqa: E402
from analysis.rivals.settings import DraftSettings  # noqa: E402
from kernels_profile.e2e.settings import MethodPlan  # noqa: E402


@dataclass(frozen=True)
class FakeRun:
    seconds: float
    forwards: int
    tokens: int
    accepted: tuple[int, ...] = ()
    new_tokens: tuple[int, ...] = ()
    emitted: tuple[int, ...] = ()
    draft_seconds: float = 0.0


class FakeExecutor:
    """Records which method ran when; a method's time is its cost times the machine's speed in
    that repeat (a repeat = one call of each method), so within-repeat ratios are exact. One fake
    serves both prompts (its `prompt_ids` are both's), so `calls` holds every method in run order."""

    prompt_ids = [0, 0, 0]

    def __init__(self, costs: dict, speed_per_repeat: list[float], methods_per_repeat: int, prompt_seconds: float = 0.5):
        self.costs, self.speed, self.per_repeat = costs, speed_per_repeat, methods_per_repeat
        self.prompt_seconds = prompt_seconds
        self.calls: list[str] = []
        self.prompts = 0

    def _run(self, method: str, forwards: int = 4) -> FakeRun:
        repeat = len(self.calls) // self.per_repeat
        self.calls.append(method)
        ones = (1,) * forwards
        return FakeRun(self.costs[method] * self.speed[repeat], forwards, 4, new_tokens=ones, emitted=ones)

    def time_prompt(self) -> float:
        self.prompts += 1
        return self.prompt_seconds

    def autoregressive(self, gold):
        return self._run("ar"), None

    def speculative(self, gold, drafter, k):
        run = self._run(drafter.name)
        return FakeRun(run.seconds, run.forwards, run.tokens, (0,) * run.forwards, run.new_tokens, run.emitted)

    def copy_as_decode(self, segments, directives=False):
        return self._run(segments + ("-decoded" if directives else "-ideal")), None


@dataclass(frozen=True)
class FakeDrafter:
    name: str


def fake_drafters(method, prompt, plan):
    """The fake executor's drafter: it only names the method it drafts for."""
    return FakeDrafter(method.name)


E2E_PLAN = MethodPlan((Method("ar"), Method("pld", policy="latest", k=10), Method("copy", level="line", directives=IDEAL),
                       Method("copy", level="token", directives=IDEAL), Method("copy", level="line", directives=DECODED)),
                      DraftSettings(3, DEFAULTS, ()))
E2E_COSTS = {"ar": 8.0, "pld-latest-k10": 4.0, "copy-line-ideal": 2.0, "copy-token-ideal": 1.0, "copy-line-decoded": 2.5}
E2E_SEGMENTS = {"line": "copy-line", "token": "copy-token"}  # the fake executor runs a segment list as its name


def e2e_measured(seed: str, repeats: int, speed=None) -> tuple[FakeExecutor, list[dict]]:
    """A FakeExecutor and the records of measure_case over it for one case of E2E_PLAN."""
    from kernels_profile.e2e.methods import measure_case

    fake = FakeExecutor(E2E_COSTS, speed or [1.0] * repeats, len(E2E_PLAN.methods))
    executors = {"rewrite": fake, "program": fake}
    return fake, measure_case(executors, [1, 2, 3, 4], E2E_SEGMENTS, E2E_PLAN, repeats, seed, fake_drafters)


# ---------------------------------------------------------------- the pilot stage: frozen runs (pilot_record is above)

def pilot_frozen_metrics(steps: int, em_after: int, he_after: int | None) -> dict:
    """A pilot run's metrics.json: `steps` trained, held-out EM after of seed 0, HEvalFix-Py EM after (None: not run)."""
    curve = [{"mode": "program", "seed": 0, "step": step, "sequences": 33, "loss": loss, "directive_accuracy": 0.9,
              "copy_exact": 0.5, "gen_exact": 0.3, "all_exact": exact}
             for step, loss, exact in ((0, 2.0, 0.0), (steps // 2, 0.5, 1 / 33), (steps, 0.2, 3 / 33))]
    m = {"model": "smollm2-135m", "steps": steps, "method": f"LoRA {steps}", "heldout_cases": 33,
         "heldout_em_before": 0, "heldout_em_after": {"0": em_after}, "curve": curve,
         "before": {"cases": 33, "exact_match": 0}, "after_program": {"0": {"cases": 33, "exact_match": em_after}},
         "teacher_forced_before": {"program": curve[0]}, "teacher_forced_after": {"program": {"0": curve[-1]}}}
    if he_after is not None:
        m.update(humaneval_cases=33, humaneval_em_before=0, humaneval_em_after={"0": he_after},
                 humaneval_before={"cases": 33, "exact_match": 0, "em": 0.0},
                 humaneval={"0": {"cases": 33, "exact_match": he_after, "em": he_after / 33}})
    return m


PILOT_RUN = {"command": "copydecode pilot --preset pilot-long", "commit": "abc1234", "date": "2026-11-30",
             "seconds": 2400.0, "minutes": 40, "machine": "2 shared cores"}


# ---------------------------------------------------------------- serving: a forwards table and a step-cost model

def forwards_frame(cases: int = 6, seed: int = 0):
    """A forwards table (data/rivals/forwards.parquet's schema) of `cases` made-up edits: AR (one decode per gold
    token), a prompt-lookup rival (verifies of k + 1 = 5 tokens, seeded acceptance), Copy-as-Decode (copy
    prefills between decoded stretches, with directive decodes that emit nothing) and its ideal variant."""
    import random

    import polars as pl

    from analysis.serving.forwards import FORWARDS_SCHEMA

    rng = random.Random(seed)
    rows = []
    for i in range(cases):
        prompt, spans = 40 + 10 * i, [("copy", 12 + i), ("gen", 3), ("copy", 20), ("gen", 2 + i % 3)]
        gold = sum(n for _, n in spans)
        corpus = "HEvalFix-Py" if i % 2 else "ProbeEdit-S"
        framing = "body" if i % 2 else "unit"
        base = {"case_id": f"case/{i}", "corpus": corpus, "framing": framing, "prompt_tokens": prompt, "gold_tokens": gold}
        rows.append({**base, "method": "ar", "new_tokens": [1] * gold, "emitted": [1] * gold})
        new, out, left = [], [], gold
        while left:
            take = min(rng.randint(1, 5), left)
            new.append(5)
            out.append(take)
            left -= take
        rows.append({**base, "method": "pld-earliest-k5", "new_tokens": new, "emitted": out})
        for method, directive in (("copy-line-decoded", 4), ("copy-line-ideal", 0)):
            new, out = [], []
            for kind, n in spans:
                new += [1] * directive
                out += [0] * directive
                if kind == "copy":
                    new.append(n)
                    out.append(n)
                else:
                    new += [1] * n
                    out += [1] * n
            rows.append({**base, "method": method, "new_tokens": new, "emitted": out})
    return pl.DataFrame(rows, schema=FORWARDS_SCHEMA)


def step_cost_model(source: str = "batched", **terms):
    """A step-cost model with round terms: 10 ms a step, 1 ms a token past T* = 8, small KV and attention terms."""
    from analysis.latency.stepcost import MEASURED, StepCostModel, StepRange

    values = {"c0": 0.010, "c_seq": 0.0002, "c_w": 0.008, "t_star": 8.0, "c_kv": 1e-6, "c_a": 1e-8, **terms}
    return StepCostModel(source=source, **values, basis=MEASURED, fitted_range=StepRange(16, 1024, 1024))


def serving_params(**changes) -> dict:
    """The shipped params with the serving sweep shrunk to a test's size and the fixture's methods."""
    shrink = {"serving.methods": ["ar", "pld-earliest-k5", "copy-line-decoded", "copy-line-ideal"],
              "serving.best_of": {"pld-best": ["pld-earliest-k5"]},
              "serving.sources": ["batched"], "serving.engine.max_num_batched_tokens": [64],
              "serving.engine.max_num_seqs": 8, "serving.closed_loop.concurrency": [1, 2, 8],
              "serving.closed_loop.min_requests": 12, "serving.open_loop.qps_fractions": [0.5],
              "serving.open_loop.requests": 12, "serving.headline_concurrency": [1, 8],
              "serving.replay.concurrency": [1, 2], "serving.replay.steps_per_stratum": 2,
              "serving.engine.headline_budget": {"default": 64}}
    return params_with(**{**shrink, **changes})


# ---------------------------------------------------------------- grammar exports: the copies an engine accepts

QWEN_EOS = 151643


def copy_spans(n_lines: int, sample: int | None = None, seed: int = 0) -> list[tuple[int, int]]:
    """Every (i, j) with 1 <= i <= j <= n_lines, or a seeded sample of `sample` of them plus the whole file and
    its last line."""
    import random

    if sample is None or n_lines * (n_lines + 1) // 2 <= sample + 2:  # no more distinct spans than asked for
        return [(i, j) for i in range(1, n_lines + 1) for j in range(i, n_lines + 1)]
    rng = random.Random(seed)
    picked = {(1, n_lines), (n_lines, n_lines)}
    while len(picked) < sample + 2:
        i, j = sorted((rng.randint(1, n_lines), rng.randint(1, n_lines)))
        picked.add((i, j))
    return sorted(picked)


def mutations(text: str) -> list[str]:
    """Other bytes for a copied span: its line endings as another convention, a byte dropped at its end."""
    out = {text.replace("\r\n", "\n"), text.replace("\r", "\n"), text.replace("\n", "\r\n"), text[:-1]}
    return sorted(t for t in out if t != text)


def _mergeable_end(lines: list[str]) -> int:
    """The bytes at the end of a span whose tokens may merge with what follows it: its last line, the blank lines
    before it and the line before those (blank lines merge into the previous newline's token: `)\\n\\n`)."""
    end, k = len(lines[-1].encode()), len(lines) - 2
    while k >= 0 and not lines[k].strip():
        end, k = end + len(lines[k].encode()), k - 1
    return end + (len(lines[k].encode()) if k >= 0 else 0)


def check_forced_copies(matcher, qwen, source: str, sample: int | None = None, seed: int = 0) -> int:
    """The forced-span grammar of `source` (a compiled llguidance matcher) accepts exactly the file's copy
    programs: after each `<copy lines="i-j"/>` it fast-forwards the bytes of lines i..j as the suite splits
    them (only '\\n' ends a line: analysis.text.lines; all but an end whose tokens could merge with what
    follows: _mergeable_end) and accepts their tokens, rejects any other line endings or a byte short, and rejects a
    copy past the last line. Returns the spans checked."""
    from analysis.text.lines import split_lines

    lines = split_lines(source)
    spans = copy_spans(len(lines), sample, seed)
    for i, j in spans:
        header = list(qwen.encode_program(f'<copy lines="{i}-{j}"/>').ids)
        walk = matcher.deep_copy()
        assert walk.consume_tokens(header), (i, j, walk.get_error())
        text = "".join(lines[i - 1:j])
        ids = list(qwen.encode(text).ids)
        # the tokens the engine forces spell the span's own bytes (tokenized in the stream's context), up to an
        # end whose tokens could merge with what follows
        forced = b"".join(qwen.piece(t) for t in walk.compute_ff_tokens())
        assert text.encode().startswith(forced), (i, j, text[:60])
        assert len(text.encode()) - len(forced) <= _mergeable_end(lines[i - 1:j]), (i, j, text[:60])
        for other in mutations(text):
            wrong = walk.deep_copy()
            assert not (wrong.consume_tokens(list(qwen.encode(other).ids)) and wrong.is_accepting()), (i, j, other[:60])
        assert walk.consume_tokens(ids) and walk.is_accepting(), (i, j, walk.get_error())
    past = matcher.deep_copy()
    assert not past.consume_tokens(list(qwen.encode_program(f'<copy lines="1-{len(lines) + 1}"/>').ids))
    return len(spans)


def serving_cases(forwards) -> "pl.DataFrame":
    """The corpora stage's cases table for a forwards fixture: each case's source, a few short lines (what the
    serving stage numbers for Copy-as-Decode's prompt)."""
    import polars as pl

    cases = forwards.select("case_id", "corpus", "framing").unique().sort("case_id")
    return cases.with_columns(
        language=pl.lit("python"), instruction=pl.lit("fix it"), target=pl.lit("x = 1\n"),
        source=pl.col("case_id").map_elements(lambda c: "".join(f"line {k} of {c}\n" for k in range(12)),
                                              return_dtype=pl.String))
