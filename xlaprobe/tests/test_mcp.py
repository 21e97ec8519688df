"""``xlaprobe mcp`` driven by the mcp SDK's own client over stdio: list the tools, check a shared
case, read its finding, draft its upstream report."""

import json
import os
import sys

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="the mcp SDK is not installed (pip install 'xlaprobe[mcp]')")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.test_cli import CASES  # noqa: E402

TOOLS = {"check", "fuzz", "findings", "localize", "reduce", "bisect", "upstream"}


def _answer(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _session(db):
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "xlaprobe.cli", "mcp", "--db", str(db)],
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        assert all(tool.description for tool in listed.tools)
        checked = _answer(await session.call_tool(
            "check", {"target": str(CASES / "dus_shifted_self_update.py"),
                      "configs": "xla,reference"}))
        assert checked["exit_code"] == 1
        (finding,) = checked["result"]["findings"]
        assert (finding["config"], finding["kind"]) == ("xla", "mismatch")
        listed_findings = _answer(await session.call_tool("findings", {}))
        assert [f["id"] for f in listed_findings["result"]] == [finding["id"]]
        drafted = _answer(await session.call_tool("upstream", {"finding_id": finding["id"]}))
        bad = await session.call_tool("localize", {"finding_id": 99})
        return drafted, bad


def test_an_agent_checks_a_shared_case_and_drafts_its_report(tmp_path):
    drafted, bad = anyio.run(_session, tmp_path / "agent.db")
    report = drafted["result"]
    assert drafted["exit_code"] == 0 and report["repro_exit"] == 1
    assert report["repository"] == "openxla/xla"
    assert report["title"].startswith("[XLA:CPU] dynamic_update_slice")
    assert "MISMATCH output 0" in report["repro_output"]
    # Bad input is a tool error with the command's one-line message, not a crash of the server.
    assert bad.is_error and "no finding 99" in bad.content[0].text


def test_malformed_lines_get_json_rpc_errors_and_the_server_names_its_version(tmp_path):
    """A line that is no JSON gets -32700 and JSON of no message's shape -32600 (id null), and
    the server goes on to answer initialize with xlaprobe's version."""
    import subprocess

    from xlaprobe.version import __version__

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}
    lines = f"not json\n{json.dumps({'foo': 1})}\n{json.dumps(initialize)}\n"
    done = subprocess.run([sys.executable, "-m", "xlaprobe.cli", "mcp", "--db",
                           str(tmp_path / "x.db")], input=lines, capture_output=True, text=True,
                          timeout=120)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("error", {}).get("code") for a in answers] == [-32700, -32600, None]
    assert answers[0]["id"] is None
    assert answers[2]["result"]["serverInfo"] == {"name": "xlaprobe", "version": __version__}
