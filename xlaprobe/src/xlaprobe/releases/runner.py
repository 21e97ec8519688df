"""Run one StableHLO module under the jax/jaxlib release of the interpreter that runs this file.

This file is executed by path (``python runner.py REQUEST_DIR``) by the interpreter of another
release's virtual environment, so it imports nothing from xlaprobe and only what every jax release
since 0.4.33 provides. The request directory holds ``module.mlir`` (StableHLO text without
locations or Shardy attributes, which older parsers reject), ``request.json`` (compiler options,
input dtypes and shapes) and ``input_<i>.bin`` (raw bytes, C order). The reply is ``reply.json``
plus ``output_<i>.bin`` on success.

Exit codes: 0 ran; 3 unsupported (the release cannot load the module: a parse error, an unknown
op or custom-call target); 4 compile or run error; a signal when XLA crashes (an abort or
segfault is the compiler's, and the caller reports it as a crash).

``python runner.py --serve`` serves many requests in one process (importing jax once): it reads
one request directory per line on stdin and answers each with its exit code on a line of stdout;
anything else the release prints goes to stderr. A crash kills the process with its signal, as
for a single request; end of stdin ends it.
"""

import json
import os
import sys

EXIT_UNSUPPORTED = 3
EXIT_ERROR = 4
#: Error texts that mean "this release does not know this module", not "the compiler failed".
_UNSUPPORTED_HINTS = ("parse", "unknown operation", "unregistered operation", "unknown attribute",
                      "no registered implementation for custom call", "custom call target",
                      "custom_call_target", "unknown custom call", "not registered")


def _reply(directory, **fields):
    with open(os.path.join(directory, "reply.json"), "w") as handle:
        json.dump(fields, handle)


def _dtype(name):
    import numpy as np  # the parent imports this file for its path: no numpy there
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # narrow floats (bfloat16, float8_*) and int4 live here
        return np.dtype(getattr(ml_dtypes, name))


def _warm_up_linear_algebra():
    # LAPACK custom-call targets are registered on first use of jnp.linalg; a module that calls
    # one before that segfaults in some releases.
    import jax.numpy as jnp
    eye = jnp.eye(2, dtype=jnp.float32)
    for fn in (jnp.linalg.cholesky, jnp.linalg.qr, jnp.linalg.eigh, jnp.linalg.svd,
               jnp.linalg.inv, jnp.linalg.det):
        try:
            fn(eye)
        except Exception:  # pragma: no cover - a release without one of them
            pass


def main(directory):
    import numpy as np  # as in _dtype

    with open(os.path.join(directory, "request.json")) as handle:
        request = json.load(handle)
    with open(os.path.join(directory, "module.mlir")) as handle:
        text = handle.read()

    import jax  # the release's own jax, only in its interpreter (as numpy above)
    jax.config.update("jax_enable_x64", True)  # else device_put narrows 64-bit inputs
    try:
        # Private modules: a release with another layout is answered, not crashed.
        from jax._src import compiler
        from jax._src.lib import xla_client
    except ImportError as exc:  # pragma: no cover - a release with another layout
        _reply(directory, error=f"this jax has no compiler module: {exc}")
        return EXIT_UNSUPPORTED
    if "lapack" in text:
        _warm_up_linear_algebra()
    args = []
    for i, spec in enumerate(request["inputs"]):
        with open(os.path.join(directory, f"input_{i}.bin"), "rb") as handle:
            raw = handle.read()
        args.append(np.frombuffer(raw, dtype=_dtype(spec["dtype"])).reshape(spec["shape"]))
    device = jax.devices("cpu")[0]
    backend = device.client
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                           env_options_overrides=request["options"])
    try:
        if hasattr(backend, "compile_and_load"):
            executable = backend.compile_and_load(text, xla_client.DeviceList((device,)), options)
        else:
            executable = backend.compile(text, options)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}".strip()
        lowered = message.lower()
        code = EXIT_UNSUPPORTED if any(h in lowered for h in _UNSUPPORTED_HINTS) else EXIT_ERROR
        _reply(directory, error=message.splitlines()[0][:2000] if message else "")
        return code
    try:
        outputs = executable.execute([jax.device_put(a, device) for a in args])
        outputs = [np.asarray(o) for o in outputs]
    except Exception as exc:
        _reply(directory, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:2000])
        return EXIT_ERROR
    specs = []
    for i, out in enumerate(outputs):
        out = np.asarray(out, order="C")  # ascontiguousarray would make a scalar 1-d
        with open(os.path.join(directory, f"output_{i}.bin"), "wb") as handle:
            handle.write(out.tobytes())
        specs.append({"dtype": out.dtype.name, "shape": list(out.shape)})
    _reply(directory, outputs=specs, jax=jax.__version__)
    return 0


def serve():
    """Answer request directories read from stdin, one per line, with their exit codes."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the release's own prints must not be taken for a reply
    for line in sys.stdin:
        directory = line.strip()
        if not directory:
            continue
        try:
            code = main(directory)
        except Exception as exc:  # a broken request: answer it, serve the next
            _reply(directory, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:2000])
            code = EXIT_ERROR
        replies.write(f"{code}\n")
        replies.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(main(sys.argv[1]))
