"""Capture what the compiler generated.

`capture_on(capture_dir)` wraps the capture recompile (in the cold process, after the cold
figure is written): the FX and AOT caches off, so Inductor really compiles again; depyf's dump
(bytecode, graphs at each stage, output code); TORCH_TRACE's structured log, which carries
Inductor's provenance (switched on in compile/settings.py) and output code. `read_trace` pulls
them out, `write_kernels` splits each generated kernel into its own file.

The capture's four patches to torch and depyf internals live here, and undo themselves on exit:
depyf's kernel hook with the signature torch 2.13 calls, depyf's bytecode hook made to dump
without replacing Dynamo's bytecode, a TORCH_TRACE handler attached after import (torch
reads the TORCH_TRACE variable only when it is imported), and Inductor's graph counter started
again (graph_ids_from_zero). The only other
one, for Inductor's benchmarks before torch 2.13, is settings.benchmarks_alone.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import json
import os
import re

PROVENANCE_ARTIFACTS = (
    "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces",
)
# `name = async_compile.triton('name', '''src''', ...)` or
# `name = async_compile.cpp_pybinding([...], r'''src''')`
KERNEL_DEF_RE = re.compile(
    r"^(?P<name>\w+) = async_compile\.(?P<how>\w+)\(.*?r?'''\n?(?P<src>.*?)'''",
    re.DOTALL | re.MULTILINE,
)


def _shim_load_by_key_path(key, path, linemap=None, attrs=None, **kwargs):
    """depyf 0.20's hook, minus its fixed signature: torch 2.13 passes `set_sys_modules=` too.

    Does what depyf's `patched_load_by_key_path` does (copy each loaded module into the dump) and
    forwards every keyword torch gives, so it keeps working when torch adds more.
    """
    from depyf.explain.global_variables import data
    from depyf.explain.utils import get_current_compiled_fn_name, write_code_to_file_template

    with open(path) as f:
        src = f.read()
    template = os.path.join(data["dump_src_dir"], get_current_compiled_fn_name() + ".kernel_%s.py")
    new_path = write_code_to_file_template(src, template)
    return data["unpatched_load_by_key_path"](key, new_path, linemap, attrs, **kwargs)


def _dump_only(depyf_call):
    """depyf's bytecode hook, minus its replacement of the code Dynamo made.

    depyf runs its own decompiled-and-recompiled copy of Dynamo's bytecode in its place (so a
    debugger can step through the dumped files); where its decompiler is wrong, the program
    is: transformers' flex_attention_mask on Python 3.12 came back as `None[0][0:0] = [...]`
    and the capture compile raised TypeError. The dump is written all the same; returning None
    keeps Dynamo's bytecode, the program the user runs.
    """

    def call(self, code, new_code):
        depyf_call(self, code, new_code)

    return call


@contextlib.contextmanager
def depyf_dump(dump_dir: str):
    """depyf.prepare_debug with our signature shim and its dump-only bytecode hook; all are
    undone on exit, even on error.

    Writes into dump_dir: full_code_for_<fn>_N.py (Dynamo's bytecode decompiled),
    __transformed_code_*.py, __compiled_fn_N.<stage>.N.py (FX graphs per stage) and
    __compiled_fn_N.kernel_N.py (Inductor output code and kernel modules).
    """
    import depyf
    from depyf.explain.enable_debugging import DebuggableHook
    from torch._inductor.codecache import PyCodeCache

    depyf_call = DebuggableHook.__dict__["__call__"]
    DebuggableHook.__call__ = _dump_only(depyf_call)
    try:
        with depyf.prepare_debug(dump_dir):
            depyf_hook = PyCodeCache.__dict__["load_by_key_path"]
            PyCodeCache.load_by_key_path = _shim_load_by_key_path
            try:
                yield
            finally:
                PyCodeCache.load_by_key_path = depyf_hook
    finally:
        DebuggableHook.__call__ = depyf_call


@contextlib.contextmanager
def torch_trace(trace_dir: str):
    """TORCH_TRACE's structured log into trace_dir for the block, as the variable would have
    set it up at import: torch's own lazy handler and trace formatter on its trace logger."""
    import logging

    from torch._logging import _internal

    handler = _internal.LazyTraceHandler(trace_dir)
    handler.setFormatter(_internal.TorchLogsFormatter(trace=True))
    log = _internal.trace_log
    level = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        handler.close()


@contextlib.contextmanager
def graph_ids_from_zero():
    """Inductor's graph counter started again from 0 for the block, then put back.

    Inductor numbers the graphs a process compiles, and on the CPU each C++ kernel's profiler
    name carries that number (`graph_1_cpp_fused_...`), so its source does too. The capture
    recompile, the process's second compile of the same graphs, would otherwise give every
    kernel a new source and build each one again (3 of a tiny Llama decode cell's 6 s capture).
    Counted from 0 again, the graphs come in the cold compile's order and get its numbers: the
    same sources, served from the kernel cache."""
    from torch._inductor import compile_fx

    counter = getattr(compile_fx, "_graph_counter", None)
    if counter is None:  # a torch that counts elsewhere: the capture only builds again
        yield
        return
    compile_fx._graph_counter = itertools.count(0)
    try:
        yield
    finally:
        compile_fx._graph_counter = counter


@contextlib.contextmanager
def capture_on(capture_dir: str):
    """A recompile in this process with everything captured, into capture_dir/depyf and
    capture_dir/torch_trace: Dynamo's caches reset, the FX graph and AOT autograd caches off
    (a cache hit would skip the compile that emits provenance and runs the passes); kernel
    caches stay on and the graphs are numbered as the cold compile numbered them, so nothing
    is compiled to machine code again."""
    import torch
    from torch._functorch import config as functorch_config
    from torch._inductor import config

    torch._dynamo.reset()
    with (
        config.patch(fx_graph_cache=False),
        functorch_config.patch(enable_autograd_cache=False),
        graph_ids_from_zero(),
        torch_trace(os.path.join(capture_dir, "torch_trace")),
        depyf_dump(os.path.join(capture_dir, "depyf")),
    ):
        yield


def _trace_records(trace_dir: str):
    """(metadata, payload) for every structured record in the TORCH_TRACE logs of trace_dir."""
    for path in sorted(glob.glob(os.path.join(trace_dir, "*.log"))):
        meta, payload = None, []
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("\t"):
                    payload.append(line[1:])
                    continue
                if meta is not None:
                    yield meta, "".join(payload)
                start = line.find("] {")
                try:
                    meta = json.loads(line[start + 2 :]) if start >= 0 else None
                except json.JSONDecodeError:
                    meta = None
                payload = []
        if meta is not None:
            yield meta, "".join(payload)


def read_trace(trace_dir: str) -> dict:
    """Per compiled graph ("frame/compile"): output code, post-grad graph and provenance.

    Returns {graph_id: {"output_code": str, "dynamo_graph": str, "post_grad_graph": str,
    "node_mappings": dict,
    "kernel_stack_traces": dict}}; keys absent where torch did not emit them (a cache hit
    emits no provenance; torch < 2.9 has none).
    """
    graphs: dict[str, dict] = {}
    for meta, payload in _trace_records(trace_dir):
        graph_id = f"{meta.get('frame_id')}/{meta.get('frame_compile_id')}"
        if "inductor_output_code" in meta:
            graphs.setdefault(graph_id, {})["output_code"] = payload
        if "dynamo_output_graph" in meta:
            graphs.setdefault(graph_id, {})["dynamo_graph"] = payload
        artifact = meta.get("artifact", {}).get("name")
        if artifact == "inductor_post_grad_graph":
            graphs.setdefault(graph_id, {})["post_grad_graph"] = payload
        elif artifact in PROVENANCE_ARTIFACTS:
            key = "node_mappings" if artifact.endswith("node_mappings") else "kernel_stack_traces"
            try:
                graphs.setdefault(graph_id, {})[key] = json.loads(payload)
            except json.JSONDecodeError:
                pass
    return graphs


def split_kernels(output_code: str) -> dict[str, dict]:
    """{kernel name: {"lang": "triton"|"cpp", "source": str}} from one graph's output code."""
    kernels = {}
    for m in KERNEL_DEF_RE.finditer(output_code):
        lang = "triton" if m["how"].startswith("triton") else "cpp"
        kernels[m["name"]] = {"lang": lang, "source": m["src"]}
    return kernels


def write_kernels(graphs: dict, out_dir: str) -> dict[str, str]:
    """Write output code per graph and each kernel's source as its own file; {kernel: path}."""
    os.makedirs(os.path.join(out_dir, "kernels"), exist_ok=True)
    paths = {}
    for index, (graph_id, graph) in enumerate(sorted(graphs.items())):
        code = graph.get("output_code")
        if not code:
            continue
        with open(os.path.join(out_dir, f"output_code_graph{index}.py"), "w") as f:
            f.write(code)
        for name, kernel in split_kernels(code).items():
            ext = "py" if kernel["lang"] == "triton" else "cpp"
            path = os.path.join("kernels", f"{name}.{ext}")
            with open(os.path.join(out_dir, path), "w") as f:
                f.write(kernel["source"])
            paths[name] = path
    return paths
