"""A model's config.json and safetensors metadata: from disk, from an earlier Hub fetch, or from the Hub.

`vllm serve MODEL` names a local directory or a Hugging Face repo id. What is read, in this order:

1. disk: the directory itself, or the repo's snapshot in the Hugging Face cache ($HF_HUB_CACHE, else
   $HF_HOME/hub, else ~/.cache/huggingface/hub) holding every safetensors shard. Of a .safetensors file
   only its header is read (8 bytes of length, then JSON), never tensor data.
2. cache: what an earlier run fetched from the Hub for the same endpoint, repo and revision, kept in
   huggingface_hub's assets cache ($HF_ASSETS_CACHE, else $HF_HOME/assets) under llm-gateway/fit/.
   No request is made, and huggingface_hub is not even imported.
3. Hub: config.json, tokenizer_config.json and modules.json (sentence-transformers) with `hf_hub_download` (into the
   Hugging Face cache, where vLLM finds them later) and the safetensors headers with
   `HfApi.get_safetensors_metadata` (HTTP range requests of each shard's first bytes), at the command's --revision.
   HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE are honoured as huggingface_hub honours them. Each request waits at most
   FIT_HUB_TIMEOUT seconds (default 3) and the fetches of all models, made side by side, at most
   TOTAL_TIMEOUTS times that; what cannot be fetched gets a one-line reason, never a traceback.

Nothing here judges: fit.py estimates from what was found, context.py takes a context from the config; `check` only
reports a repo or revision the Hub says does not exist.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from .vllm_command import ServeCommand

if TYPE_CHECKING:
    from .state import Model, State

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT = 3.0  # seconds per Hub request; FIT_HUB_TIMEOUT overrides it
TOTAL_TIMEOUTS = 3  # all Hub fetches of one run together wait at most this many request timeouts
LIBRARY = "llm-gateway"  # user agent, and the folder in huggingface_hub's assets cache
FLOAT_TENSORS = {"F64", "F32", "F16", "BF16"}  # cast to the serving dtype at load; quantized ints are not
MAX_HEADER = 100 * 2**20  # a safetensors header larger than this is not one
REPO_ID = re.compile(r"[\w][\w.-]*(/[\w][\w.-]*)?")  # huggingface_hub's repo id shape: name or namespace/name


@dataclass(frozen=True)
class Weights:
    stored: int  # bytes as the checkpoint holds them
    floating: int  # bytes of floating-point tensors among them (cast to the serving dtype at load); -1 unknown
    source: str  # "safetensors headers of N file(s)" or "model.safetensors.index.json"


@dataclass(frozen=True)
class ModelFiles:
    """What is known of one model's files. `config` None: not found (`missing` says why)."""

    model: str
    config: dict | None = None  # config.json as published
    tokenizer_max: int | None = None  # tokenizer_config.json model_max_length (vLLM caps the context by it)
    modules: list | None = None  # a sentence-transformers modules.json (vLLM pools such a model by default)
    weights: Weights | None = None
    origin: str = ""  # "disk", "cache" or "Hub"; "" when nothing was found
    where: str = ""  # the directory, or repo@commit
    missing: str = ""  # why the config or the weights are missing (a sentence, no traceback)
    problem: str = ""  # the Hub says the repo or revision does not exist: vLLM could not start it either

    @property
    def label(self) -> str:
        """Where the metadata came from, for the summary."""
        return {
            "disk": f"metadata from disk: {self.where}",
            "Hub": f"metadata from the Hub: {self.where}",
            "cache": f"metadata from the cache of an earlier Hub fetch: {self.where}",
        }.get(self.origin, "")


# --- the environment, read when called (as huggingface_hub reads it when imported) -------------------------


def _is_true(value: str | None) -> bool:
    return (value or "").upper() in {"1", "ON", "YES", "TRUE"}


def offline() -> bool:
    return _is_true(os.environ.get("HF_HUB_OFFLINE")) or _is_true(os.environ.get("TRANSFORMERS_OFFLINE"))


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_timeout() -> float:
    try:
        value = float(os.environ.get("FIT_HUB_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def _path(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(value)))


def _hf_home() -> Path:  # the variables and defaults of huggingface_hub.constants
    return _path(
        os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    )


def hf_cache_dir() -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return _path(os.environ[var])
    return _hf_home() / "hub"


def assets_dir() -> Path:
    for var in ("HF_ASSETS_CACHE", "HUGGINGFACE_ASSETS_CACHE"):
        if os.environ.get(var):
            return _path(os.environ[var])
    return _hf_home() / "assets"


def is_repo_id(model: str) -> bool:
    """Could vLLM download `model` from the Hub? (A local directory that exists wins, as in vLLM.)"""
    return bool(REPO_ID.fullmatch(model)) and ".." not in model and "--" not in model and len(model) <= 96


# --- disk -------------------------------------------------------------------------------------------------


def find_model_dir(model: str, revision: str | None = None, cache: Path | None = None) -> Path | None:
    """The directory holding the model's config.json: the path itself, or its HF cache snapshot."""
    local = Path(model).expanduser()
    if (local / "config.json").is_file():
        return local
    return cached_snapshot(model, revision, "config.json", cache) if is_repo_id(model) else None


def cached_snapshot(repo_id: str, revision: str | None, marker: str, cache: Path | None = None) -> Path | None:
    """The repo's snapshot in the HF cache that holds `marker` (a file name): the revision's (refs/<revision or
    main>), else, with no revision asked, the newest snapshot holding it."""
    repo = (cache or hf_cache_dir()) / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / (revision or "main")
    rev = ref.read_text().strip() if ref.is_file() else revision
    if rev and (repo / "snapshots" / rev / marker).is_file():
        return repo / "snapshots" / rev
    if revision is None:  # no refs/main (e.g. copied caches): the newest snapshot with the marker
        snaps = sorted(
            (p for p in (repo / "snapshots").glob("*") if (p / marker).is_file()), key=lambda p: p.stat().st_mtime
        )
        return snaps[-1] if snaps else None
    return None


def safetensors_header(path: Path) -> dict:
    """The JSON header of a .safetensors file: 8-byte little-endian length, then JSON. No tensor data."""
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        if size > MAX_HEADER:
            raise ValueError(f"{path.name}: header of {size} bytes; not a safetensors file")
        return json.loads(fh.read(size))


def _sum_tensors(headers: list[dict]) -> tuple[int, int]:
    stored = floating = 0
    for header in headers:
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            stored += end - begin
            floating += (end - begin) if t["dtype"] in FLOAT_TENSORS else 0
    return stored, floating


def weights_on_disk(model_dir: Path) -> Weights | None:
    """Sum of tensor sizes from the safetensors headers, else the index's total_size."""
    index = model_dir / "model.safetensors.index.json"
    index_data = json.loads(index.read_text()) if index.is_file() else None
    if index_data is not None:
        files = sorted({model_dir / f for f in index_data.get("weight_map", {}).values()})
    else:
        files = sorted(model_dir.glob("*.safetensors"))
    if files and all(f.is_file() for f in files):
        stored, floating = _sum_tensors([safetensors_header(f) for f in files])
        return Weights(stored, floating, f"safetensors headers of {len(files)} file(s)")
    total = (index_data or {}).get("metadata", {}).get("total_size")
    if total:
        return Weights(int(total), -1, index.name)
    return None


def _model_max_length(tokenizer_config: object) -> int | None:
    value = tokenizer_config.get("model_max_length") if isinstance(tokenizer_config, dict) else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _read_config(path: Path) -> dict:
    config = json.loads(path.read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return config


def _on_disk(model: str, revision: str | None) -> ModelFiles | None:
    model_dir = find_model_dir(model, revision)
    if model_dir is None:
        return None
    try:
        config = _read_config(model_dir / "config.json")
        tok = model_dir / "tokenizer_config.json"
        tokenizer_max = _model_max_length(json.loads(tok.read_text())) if tok.is_file() else None
        weights = weights_on_disk(model_dir)
        modules = (
            json.loads((model_dir / "modules.json").read_text()) if (model_dir / "modules.json").is_file() else None
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as exc:  # files of another shape
        return ModelFiles(
            model,
            origin="disk",
            where=str(model_dir),
            missing=f"could not read the model's files ({type(exc).__name__}: {exc})",
        )
    missing = "" if weights else f"no safetensors weights or index in {model_dir}"
    return ModelFiles(model, config, tokenizer_max, modules, weights, "disk", str(model_dir), missing)


# --- cache of earlier Hub fetches -------------------------------------------------------------------------


def cache_file(ep: str, model: str, revision: str | None) -> Path:
    host = urlsplit(ep).netloc.replace(":", "_") or "hub"
    return (
        assets_dir()
        / LIBRARY
        / "fit"
        / host
        / model.replace("/", "--")
        / (quote(revision or "main", safe="") + ".json")
    )


def _from_entry(model: str, entry: dict, origin: str) -> ModelFiles:
    w = entry.get("weights")
    weights = Weights(int(w["stored"]), int(w["floating"]), str(w["source"])) if w else None
    if not isinstance(entry["config"], dict):
        raise ValueError("config is not an object")
    if "modules" not in entry:  # written before modules.json was read: fetch again
        raise KeyError("modules")
    return ModelFiles(
        model,
        entry["config"],
        entry.get("tokenizer_max"),
        entry["modules"],
        weights,
        origin,
        f"{model}@{str(entry['commit'])[:7]}",
        entry.get("weights_missing") or "",
    )


def _from_cache(ep: str, model: str, revision: str | None) -> ModelFiles | None:
    try:
        return _from_entry(model, json.loads(cache_file(ep, model, revision).read_text()), "cache")
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or of another shape: fetch again
        return None


def _save(ep: str, model: str, revision: str | None, entry: dict) -> None:
    path = cache_file(ep, model, revision)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(json.dumps(entry, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the next run fetches again
        pass


# --- the Hub ------------------------------------------------------------------------------------------------


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in seen:
        seen.append(link)
        link = link.__cause__ or link.__context__
    return seen


def _is(exc: BaseException, *names: str) -> bool:
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def _first_line(exc: BaseException) -> str:
    text = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def why_not(exc: BaseException, model: str, revision: str | None, ep: str, timeout: float) -> tuple[str, bool]:
    """(one-line reason, is it a problem of models.yml) for an exception of a Hub fetch."""
    chain = _chain(exc)

    def status(names: tuple[str, ...]) -> str:
        e = next(e for e in chain if _is(e, *names))
        code = getattr(getattr(e, "response", None), "status_code", None)
        return f" (the Hub answered {code})" if code else ""

    def has(*names: str) -> bool:
        return any(_is(e, *names) for e in chain)

    if has("OfflineModeIsEnabled"):
        return "huggingface_hub is in offline mode (HF_HUB_OFFLINE=1)", False
    if has("GatedRepoError"):
        return (
            f"{model} is a gated repository on {ep} and this request has no access{status(('GatedRepoError',))}; "
            "set HF_TOKEN to a token that was granted access to it"
        ), False
    if has("RevisionNotFoundError"):
        return (
            f"--revision {revision} does not exist in {model} on {ep}{status(('RevisionNotFoundError',))}; "
            "give a branch, tag or commit of that repository"
        ), True
    if has("RepositoryNotFoundError"):
        return (
            f"model {model!r} does not exist on {ep}{status(('RepositoryNotFoundError',))}: check the repo id's "
            "spelling (no did-you-mean is possible: the Hub does not say which ids are close); a private "
            "repository answers the same without a token: then set HF_TOKEN (HF_HUB_OFFLINE=1 skips the check)"
        ), True
    if has("TimeoutException", "TimeoutError"):
        return f"the Hub at {ep} did not answer within {timeout:g} s (FIT_HUB_TIMEOUT)", False
    if has("ConnectError", "NetworkError", "ProxyError", "ConnectionError"):
        err = next(e for e in chain if _is(e, "ConnectError", "NetworkError", "ProxyError", "ConnectionError"))
        return f"the Hub at {ep} could not be reached ({_first_line(err)})", False
    if has("HfHubHTTPError"):
        answer = status(("HfHubHTTPError",))
        if "401" in answer:  # not a missing or gated repo: the token itself was refused
            return f"the Hub at {ep} refused the token{answer}: check HF_TOKEN (or `hf auth login`)", False
        if "404" in answer:  # the Hub says which repo, revision or file is missing; this server did not
            return (
                f"{ep} answered 404 for {model} without saying what is missing: is HF_ENDPOINT a Hugging Face "
                "Hub or a mirror of it?"
            ), False
        return f"the Hub at {ep} refused the request for {model}{answer}", False
    return f"could not read {model}'s metadata from the Hub at {ep} ({_first_line(exc)})", False


def _fetch(model: str, revision: str | None, ep: str, timeout: float) -> ModelFiles:
    """One model's config.json, tokenizer_config.json and safetensors headers from the Hub; never raises."""
    try:
        from huggingface_hub import HfApi, hf_hub_download
        from huggingface_hub.errors import NotASafetensorsRepoError, RemoteEntryNotFoundError

        api = HfApi(endpoint=ep, library_name=LIBRARY)  # token: HF_TOKEN, else the one `hf auth login` stored
        # one request first: does the repo (and revision) exist, and at which commit; no retries
        commit = api.model_info(model, revision=revision, timeout=timeout).sha or revision or "main"

        def download(filename: str) -> Path:
            return Path(
                hf_hub_download(
                    model,
                    filename,
                    revision=commit,
                    cache_dir=hf_cache_dir(),
                    endpoint=ep,
                    etag_timeout=timeout,
                    library_name=LIBRARY,
                )
            )

        config = _read_config(download("config.json"))
        try:
            tokenizer_max = _model_max_length(json.loads(download("tokenizer_config.json").read_text()))
        except RemoteEntryNotFoundError:  # the Hub says there is none (a network error is not this)
            tokenizer_max = None
        try:  # sentence-transformers: vLLM pools a model with a Pooling module by default
            modules = json.loads(download("modules.json").read_text())
        except RemoteEntryNotFoundError:
            modules = None
        weights, weights_missing = None, ""
        try:
            meta = api.get_safetensors_metadata(model, revision=commit, timeout=timeout)
            headers = [
                {n: {"dtype": t.dtype, "data_offsets": t.data_offsets} for n, t in f.tensors.items()}
                for f in meta.files_metadata.values()
            ]
            stored, floating = _sum_tensors(headers)
            weights = {
                "stored": stored,
                "floating": floating,
                "source": f"safetensors headers of {len(headers)} file(s)",
            }
        except NotASafetensorsRepoError:
            weights_missing = f"{model}@{commit[:7]} has no safetensors weights (model.safetensors or its index)"
    except Exception as exc:  # noqa: BLE001 - whatever the network or a mirror does, one line, never a traceback
        reason, is_problem = why_not(exc, model, revision, ep, timeout)
        return ModelFiles(model, missing=reason, problem=reason if is_problem else "")
    entry = {
        "endpoint": ep,
        "model": model,
        "revision": revision or "main",
        "commit": commit,
        "config": config,
        "tokenizer_max": tokenizer_max,
        "modules": modules,
        "weights": weights,
        "weights_missing": weights_missing,
        "fetched": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _save(ep, model, revision, entry)
    return _from_entry(model, entry, "Hub")


def _quiet_hub() -> None:
    """Only the requests the check needs, and only our lines: huggingface_hub's telemetry look-up (its
    agent registry, up to 3 s more on a slow network) is off unless the user asked for it, and its
    progress bars and retry warnings would interleave with the summary."""
    if "huggingface_hub" not in sys.modules and "HF_HUB_DISABLE_TELEMETRY" not in os.environ:
        os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"  # read once, at import; not left for vLLM processes we start
        try:
            import huggingface_hub.constants  # noqa: F401
        finally:
            del os.environ["HF_HUB_DISABLE_TELEMETRY"]
    from huggingface_hub.utils import disable_progress_bars
    from huggingface_hub.utils import logging as hf_logging

    disable_progress_bars()
    hf_logging.set_verbosity_error()


def _fetch_all(
    wanted: list[tuple[str, str | None]], ep: str, timeout: float
) -> dict[tuple[str, str | None], ModelFiles]:
    """Fetch side by side; whatever has not finished after TOTAL_TIMEOUTS x timeout gets a reason instead.
    Daemon threads: one left waiting on a stalled server does not keep the process alive."""
    try:
        _quiet_hub()
    except ImportError:
        why = "huggingface_hub is not installed (it comes with LiteLLM: `make venv`)"
        return {key: ModelFiles(key[0], missing=why) for key in wanted}
    results: dict[tuple[str, str | None], ModelFiles] = {}
    lock = threading.Lock()

    def run(key: tuple[str, str | None]) -> None:
        files = _fetch(key[0], key[1], ep, timeout)
        with lock:
            results[key] = files

    threads = [threading.Thread(target=run, args=(key,), name=f"fit-hub {key[0]}", daemon=True) for key in wanted]
    for t in threads:
        t.start()
    total = TOTAL_TIMEOUTS * timeout
    deadline = time.monotonic() + total
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        done = dict(results)
    late = (
        f"the Hub at {ep} did not finish answering within {total:g} s "
        f"({TOTAL_TIMEOUTS} x FIT_HUB_TIMEOUT {timeout:g} s)"
    )
    return {key: done.get(key) or ModelFiles(key[0], missing=late) for key in wanted}


def gather(commands: dict[str, ServeCommand], notify: Callable[[str], None] | None = None) -> dict[str, ModelFiles]:
    """Each model's files, by model name: disk, else cache, else Hub (all models' Hub fetches side by side)."""
    ep = endpoint()
    found: dict[str, ModelFiles] = {}
    fallback: dict[str, tuple[ModelFiles | None, ModelFiles]] = {}
    wanted: dict[tuple[str, str | None], list[str]] = {}
    for name, cmd in commands.items():
        model, revision = cmd.model, cmd.value("--revision")
        disk = _on_disk(model, revision)
        local = (Path(model).expanduser() / "config.json").is_file()
        every_shard = disk is not None and disk.weights is not None and disk.weights.source.startswith("safetensors")
        if disk is not None and (local or every_shard or disk.config is None):
            found[name] = disk  # a local directory, a cache snapshot with every shard, or files that cannot be read
            continue
        nothing = ModelFiles(model, missing=f"no config.json for {model} on disk (local path or {hf_cache_dir()})")
        if not is_repo_id(model):
            found[name] = nothing
        elif (cached := _from_cache(ep, model, revision)) is not None:
            found[name] = cached
        elif offline():
            found[name] = _with_reason(disk, nothing, "HF_HUB_OFFLINE=1 keeps the Hub out")
        else:
            wanted.setdefault((model, revision), []).append(name)
            fallback[name] = (disk, nothing)
    if wanted:
        timeout = hub_timeout()
        if notify:
            notify(
                f"fit: reading config.json and safetensors headers of {len(wanted)} model(s) from the Hub at {ep} "
                f"(at most {timeout:g} s per request, {TOTAL_TIMEOUTS * timeout:g} s in all; "
                "HF_HUB_OFFLINE=1 skips this)"
            )
        fetched = _fetch_all(list(wanted), ep, timeout)
        for key, names in wanted.items():
            got = fetched[key]
            for name in names:
                disk, nothing = fallback[name]
                if got.config is not None or (got.problem and (disk is None or disk.config is None)):
                    found[name] = got
                else:  # the Hub is out of reach: what the disk has (a config without all shards), or nothing
                    found[name] = _with_reason(disk, nothing, got.missing)
    return {name: found[name] for name in commands}


def _with_reason(disk: ModelFiles | None, nothing: ModelFiles, reason: str) -> ModelFiles:
    """The config on disk (without every shard) when the Hub cannot be asked, else nothing; with why."""
    if disk is not None and disk.config is not None:
        return disk if disk.weights else replace(disk, missing=f"{disk.missing}; {reason}")
    return replace(nothing, missing=f"{nothing.missing}; {reason}")


def read(s: State, notify: Callable[[str], None] | None = None) -> None:
    """The files of every model whose command parsed (Model.files), before any model is planned."""
    found = gather(s.commands(), notify)
    for m in s.models:
        m.files = found.get(m.name)


def check(s: State, m: Model) -> None:
    """The Hub says the model's repo or revision does not exist: vLLM could not start it either."""
    if m.meta.problem:
        s.findings.append(((m.name, "command"), m.meta.problem))
