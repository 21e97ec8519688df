"""``xlaprobe mcp``: xlaprobe as a Model Context Protocol server over stdio, for agents.

Each tool runs the matching command line with ``--json`` in a child process (``python -m
xlaprobe.cli``) and returns what it prints: the same JSON a shell user gets, compilers and their
crashes kept out of the server's process. A command's bad input (exit 2) comes back as a tool
error carrying its one-line message; its other exit codes are part of the answer (a check with
findings exits 1), so each result is ``{"exit_code": N, "result": <the command's JSON>}``.

Source: the Model Context Protocol specification (modelcontextprotocol.io), served with the
``mcp`` SDK's `MCPServer`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import typer

from xlaprobe.cli.app import app
from xlaprobe.cli.options import DEFAULT_DB, DbOption
from xlaprobe.errors import InvalidArgument
from xlaprobe.version import __version__

#: The longest fuzz session a tool call may ask for (s): an agent's call waits for its answer.
MAX_FUZZ_S = 600.0
#: Wall-time limit of one tool's command (s), beyond its own budget.
COMMAND_TIMEOUT_S = 1800.0


async def run_cli(args: list[str], timeout_s: float = COMMAND_TIMEOUT_S) -> dict[str, Any]:
    """Run ``xlaprobe ARGS`` (which must include ``--json``) in a child process.

    Returns:
        ``{"exit_code": N, "result": parsed stdout}``.

    Raises:
        ToolError: the command refused its input (exit 2: the one-line error), printed no JSON
            (the last lines of its stderr), or ran past `timeout_s`.
    """
    import asyncio  # slow to import: only the server needs it, not `xlaprobe --help`

    from mcp.server.mcpserver.exceptions import ToolError  # optional: the mcp extra
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "xlaprobe.cli", *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise ToolError(f"xlaprobe {' '.join(args)} ran past {timeout_s:.0f} s") from None
    stderr = err.decode(errors="replace").strip()
    if process.returncode == 2:
        raise ToolError(stderr.splitlines()[-1] if stderr else "xlaprobe: bad input (exit 2)")
    try:
        result = json.loads(out.decode(errors="replace"))
    except ValueError:
        tail = " | ".join(stderr.splitlines()[-3:])
        raise ToolError(f"xlaprobe {args[0]} exited {process.returncode} without JSON: "
                         f"{tail}") from None
    return {"exit_code": process.returncode, "result": result}


def build_server(db: Path) -> Any:
    """The `MCPServer` with xlaprobe's tools, each on the store at `db`.

    Raises:
        InvalidArgument: the ``mcp`` SDK is not installed.
    """
    try:
        from mcp.server.mcpserver import MCPServer  # optional: the mcp extra
    except ImportError as exc:
        raise InvalidArgument("xlaprobe mcp needs the mcp SDK: pip install 'xlaprobe[mcp]'") \
            from exc

    server = MCPServer("xlaprobe", version=__version__, instructions=(
        "Differential testing of XLA through JAX. check a target (zoo model, case module, "
        "FILE.py:FN, artifact) to get findings; findings lists them; localize, reduce and bisect "
        "a finding by id; upstream drafts its issue for openxla/xla or jax-ml/jax. Every tool "
        "returns {exit_code, result}: result is the JSON of the xlaprobe command line."))
    store = ["--db", str(db)]
    _register(server, store)
    return server


def _register(server: Any, store: list[str]) -> None:
    """Add the tools (see `build_server`)."""

    @server.tool()
    async def check(target: str, configs: str = "") -> dict[str, Any]:
        """Check a target: run configurations (default xla, xla:O0, eager and the float64
        reference) and judge each output; findings are stored (exit_code 1 when there are any)."""
        return await run_cli(["check", target, "--json", *store,
                              *(["--configs", configs] if configs else [])])

    @server.tool()
    async def fuzz(seconds: float = 60.0, configs: str = "", seed: int = 0) -> dict[str, Any]:
        """Fuzz for at most `seconds` (capped at 600): random programs checked and their
        findings stored and deduplicated; returns the campaign summary."""
        budget = min(max(float(seconds), 1.0), MAX_FUZZ_S)
        return await run_cli(["fuzz", "--time", f"{budget:g}s", "--seed", str(seed), "--json",
                              "-q", *store, *(["--configs", configs] if configs else [])],
                             timeout_s=budget + COMMAND_TIMEOUT_S)

    @server.tool()
    async def findings(finding_id: int | None = None) -> dict[str, Any]:
        """List the stored findings (newest first), or one finding by id with its detail."""
        return await run_cli(["findings", *([str(finding_id)] if finding_id else []),
                              "--json", *store])

    @server.tool()
    async def localize(finding_id: int) -> dict[str, Any]:
        """Localize a finding: failing outputs, equation, fused kernel, instruction, HLO pass."""
        return await run_cli(["localize", str(finding_id), "--json", "-q", *store])

    @server.tool()
    async def reduce(finding_id: int) -> dict[str, Any]:
        """Reduce a finding to a minimal standalone repro.py (ddmin over equations, shapes,
        values)."""
        return await run_cli(["reduce", str(finding_id), "--json", "-q", *store])

    @server.tool()
    async def bisect(finding_id: int, releases: str = "") -> dict[str, Any]:
        """Find the first bad and first fixed jaxlib release of a finding (makes release
        environments as the search reaches them)."""
        return await run_cli(["bisect", str(finding_id), "--json", "-q", *store,
                              *(["--releases", releases] if releases else [])])

    @server.tool()
    async def upstream(finding_id: int, run: bool = True) -> dict[str, Any]:
        """Draft a finding's ready-to-file upstream issue (Markdown, standalone repro, search
        terms); with `run` its repro is run once and its output included."""
        return await run_cli(["upstream", str(finding_id), "--json", *store,
                              *([] if run else ["--no-run"])])


@app.command()
def mcp(db: DbOption = DEFAULT_DB) -> None:
    """Serve xlaprobe to agents over the Model Context Protocol (stdio): tools check, fuzz,
    findings, localize, reduce, bisect and upstream, each returning its command's --json."""
    raise typer.Exit(mcp_command(db))


def mcp_command(db: Path) -> int:
    """``xlaprobe mcp``: serve over stdio until the client closes it.

    Raises:
        InvalidArgument: the ``mcp`` SDK is not installed.
    """
    server = build_server(db)  # first: without the SDK it says how to install it (anyio comes with it)
    import anyio  # optional: comes with the mcp extra

    anyio.run(serve_stdio, server)
    return 0


def rejection(exc: Exception) -> Any:
    """The JSON-RPC error answering a line that is no JSON-RPC message (id null): -32700 (parse
    error) for text that is no JSON, -32600 (invalid request) for JSON of no message's shape.

    Source: the JSON-RPC 2.0 specification, section 5.1 (error object).
    """
    import mcp_types as types  # optional, as the rest of the mcp extra below
    from mcp.shared.message import SessionMessage  # optional: the mcp extra

    errors = getattr(exc, "errors", lambda: [])()
    parse = any(e.get("type") == "json_invalid" for e in errors)
    error = types.ErrorData(code=types.PARSE_ERROR if parse else types.INVALID_REQUEST,
                            message="Parse error" if parse else "Invalid Request")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def serve_stdio(server: Any) -> None:
    """Serve `server` (an `MCPServer`) over stdio until the client closes it, answering a
    malformed line with `rejection` (the SDK's stdio transport passes it on as an exception,
    which its session only logs, and the client waits for an answer that never comes)."""
    import anyio  # optional, as the rest of the mcp extra below
    from mcp.server.stdio import stdio_server  # optional: the mcp extra

    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async serves this one too
    async with stdio_server() as (read_stream, write_stream):
        sender, receiver = anyio.create_memory_object_stream(0)

        async def screen() -> None:
            async with sender:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(rejection(item))
                    else:
                        await sender.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(screen)
            await lowlevel.run(receiver, write_stream, lowlevel.create_initialization_options())
