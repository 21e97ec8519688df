"""``xlaprobe report`` in a real headless Chromium (Debian's ``/usr/bin/chromium``, driven by
Playwright for Python): a store made by a real check of a planted fault, its localization and
reduction, and a short fuzz campaign; the page loads from ``file://`` with no console error and
shows every section with its real content. The full-page screenshot is kept under pytest's
temporary directory (its path is printed), never committed.

Without Chromium the test skips, naming the install command, so that the root test command passes
as written on a fresh machine; ``.ci/run`` installs Chromium and sets ``XLAPROBE_REQUIRE_BROWSER=1``,
under which a missing browser fails the test instead (CI always runs it). ``XLAPROBE_NO_BROWSER=1``
skips it even where a browser is installed.
"""

import contextlib
import os
import pathlib
import textwrap

import pytest

CHROMIUM = pathlib.Path("/usr/bin/chromium")
#: Chromium flags: headless, no sandbox (CI containers run as root), and nothing that reaches the
#: network on its own (the page must stand alone).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]

PROGRAM = textwrap.dedent("""
    import jax.numpy as jnp
    import numpy as np

    def f(x, y):
        return jnp.tanh(x - y), jnp.sum(x)

    def f_inputs():
        rng = np.random.default_rng(0)
        return (rng.standard_normal((8, 16)).astype(np.float32),
                rng.standard_normal((8, 16)).astype(np.float32))
""")


def _browser():
    """Playwright's sync API, or a skip (XLAPROBE_NO_BROWSER=1) or a failure saying what to
    install."""
    if os.environ.get("XLAPROBE_NO_BROWSER") == "1":
        pytest.skip("XLAPROBE_NO_BROWSER=1: the report's browser test is skipped")
    if not CHROMIUM.is_file():
        why = (f"{CHROMIUM} is missing: the report's browser test needs Debian's chromium "
               "(apt-get install -y chromium)")
        if os.environ.get("XLAPROBE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{why}; XLAPROBE_REQUIRE_BROWSER=1 (set by .ci/run) makes that a failure")
        pytest.skip(why)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install -e '.[dev]' (Playwright for Python; "
                    "its browser download is not needed, /usr/bin/chromium is used)")
    return sync_playwright


@contextlib.contextmanager
def _page(sync_playwright, path: pathlib.Path):
    """A chromium page showing `path`; on exit, asserts it reported no problem (console errors
    and warnings, page errors, failed requests, any request outside the file)."""
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.on("request", lambda r: problems.append(f"request: {r.url}")
                    if not r.url.startswith(("file://", "data:")) else None)
            page.goto(path.resolve().as_uri(), wait_until="load")
            yield page
        finally:
            browser.close()
    assert not problems, problems


def _store(tmp_path: pathlib.Path, pool, monkeypatch) -> pathlib.Path:
    """A store as a user makes it: check, localize, reduce a planted fault (the commands' own
    code, on the session's worker pool: each command would start its own workers, ~3 s of CPU
    apiece); fuzz 2 programs."""
    import contextlib

    from xlaprobe.campaign import Campaign
    from xlaprobe import api
    from xlaprobe.cli.check import check_command
    from xlaprobe.cli.localize import localize_command
    from xlaprobe.cli.reduce import reduce_command
    from xlaprobe.localization import fusion

    shared = lambda **_: contextlib.nullcontext(pool)  # noqa: E731 (the pool outlives the test)
    monkeypatch.setattr(api, "_pool", lambda *_: contextlib.nullcontext(pool))  # the check's
    monkeypatch.setattr(fusion, "make_pool", shared)
    db = tmp_path / "store" / "xlaprobe.db"
    source = tmp_path / "prog.py"
    source.write_text(PROGRAM)
    assert check_command(f"{source}:f", "xla,mutant:swap-subtract-fused", input_spec="", seed=0,
                         db=db, jobs=1, timeout_s=120.0, json_output=True,
                         all_outputs=False) == 1
    assert localize_command("1", "", db=db, json_output=True) == 0
    assert reduce_command("1", "", db=db, json_output=True, max_tests=40) == 0
    campaign = Campaign(db, ["xla", "reference"], seed=0)
    try:
        campaign.run(60.0, max_programs=2)
    finally:
        campaign.close()
    return db


def test_report_opens_in_chromium_and_shows_every_section(tmp_path, capsys, pool, monkeypatch):
    sync_playwright = _browser()
    from xlaprobe.cli.report import report_command
    from xlaprobe.store import Store

    db = _store(tmp_path, pool, monkeypatch)
    with Store(db, readonly=True) as store:
        finding = store.finding(1)
        [loc] = store.localizations(1)
    # The check wrote the failing output's error map beside the artifact: tanh(y - x) for
    # tanh(x - y) is wrong on every element (the verdict's share over is 100%), the sum is right.
    from xlaprobe.errormap import load_error_maps
    [error] = load_error_maps(pathlib.Path(finding.artifact) / "errors.npz")
    assert (error.output, error.shape, error.grid.shape, error.over) == ("[0]", (8, 16), (8, 16),
                                                                         1.0)
    page_path = report_command(db=db, out=tmp_path / "report.html")
    capsys.readouterr()
    kernel_line = next(line for line in loc["kernel_hlo"].splitlines() if "subtract(" in line)
    with _page(sync_playwright, page_path) as page:
        for section in ("findings", "errors", "localization", "reduction", "releases",
                        "campaigns", "tuning"):
            assert page.locator(f"#{section}").is_visible(), section
        findings = page.locator("#findings").inner_text()
        assert finding.fingerprint in findings and "mutant:swap-subtract-fused" in findings
        assert "mismatch" in findings
        # The error map of output [0] is an image that decoded (embedded, not fetched).
        heatmap = page.locator("#errors img.heatmap").first
        assert heatmap.is_visible() and "output [0]" in heatmap.get_attribute("alt")
        localization = page.locator("#localization").inner_text()
        assert f"equation {loc['equation']['index']} sub" in localization
        assert loc["op"]["instruction"] in localization
        assert kernel_line.strip() in page.locator("#localization pre.hlo").inner_text()
        repro = page.locator("#reduction pre.repro").inner_text()
        assert "MISMATCH" in repro and "swap-subtract-fused" in repro
        assert "No finding was bisected" in page.locator("#releases").inner_text()
        campaigns = page.locator("#campaigns").inner_text()
        assert "Campaign 1 (done)" in campaigns and "2 programs" in campaigns
        assert "No tuning search" in page.locator("#tuning").inner_text()
        images = page.locator("img.fig")
        assert images.count() >= 2
        for i in range(images.count()):
            assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), i
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_release_window_and_tuning_sections_in_chromium(tmp_path):
    # A bisection needs release environments and a tuning search minutes of timing: the
    # store of known rows of test_report.py shows these two sections.
    sync_playwright = _browser()
    from test_report import _known_store
    from xlaprobe.cli.report import report_command

    _known_store(tmp_path / "x.db")
    page_path = report_command(db=tmp_path / "x.db", out=tmp_path / "known.html")
    with _page(sync_playwright, page_path) as page:
        releases = page.locator("#releases").inner_text()
        assert "last good 0.4.33, first bad 0.5.3, first fixed -" in " ".join(releases.split())
        assert "0.7.2: not run" in releases
        tuning = page.locator("#tuning").inner_text()
        assert "my.py:step: tpe, budget 4, 5 measurements" in tuning
        assert "XLA_FLAGS=--xla_x=1" in tuning
        plot = page.locator("#tuning img.tune")
        assert plot.evaluate("img => img.complete && img.naturalWidth > 0")
        # Store text is escaped: the program named <script> is text, and nothing ran.
        assert "<script>alert(1)</script>" in page.locator("#findings").inner_text()
        assert page.evaluate("document.scripts.length") == 0
        page.screenshot(path=str(tmp_path / "known.png"), full_page=True)
