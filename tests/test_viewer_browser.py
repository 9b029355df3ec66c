"""The viewer's pages in a real headless browser (Debian's chromium).

chromium is installed by ``tests/setup_chromium.sh`` when missing (``make test`` calls it;
this module calls it too). The test is skipped, with the reason, only when chromium is
still missing after that. Every browser run is bounded (60 s) and its whole process group
is ended on a timeout. The screenshots are kept as test artifacts under
``results/test-artifacts/`` (or ``$REACTLAB_TEST_ARTIFACTS``); their paths are printed.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reactlab.views import html as viewer
from tests.conftest import ROOT
from tests.test_viewer import HOSTILE, RUNS, make_runs, parse, write_hostile_trace

SETUP = ROOT / "tests" / "setup_chromium.sh"
BROWSER_TIMEOUT = 60
FINDING_RGB = (0xFF, 0xD2, 0xCC)  # mark.finding's background in the viewer's CSS


def _find_chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _find_chromium()
    if found:
        return found
    try:
        proc = subprocess.run(["sh", str(SETUP)], capture_output=True, text=True, timeout=600,
                              check=False)
        detail = (proc.stderr or proc.stdout).strip()[-300:] or f"exit status {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        detail = str(exc)
    found = _find_chromium()
    if not found:
        pytest.skip(f"chromium is not installed and tests/setup_chromium.sh could not "
                    f"install it: {detail}")
    return found


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless chromium with the fixed flags; kill its process group on a timeout."""
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {BROWSER_TIMEOUT} s: {' '.join(args)}")
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {err[-2000:]}"
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture(scope="module")
def site(toolbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("browser")
    pairs = make_runs(toolbox, base, RUNS)
    hostile = write_hostile_trace(Path(pairs[0][0]), base / "hostil.jsonl")
    viewer.build([*pairs, (str(hostile[0]), str(hostile[1]))], base / "viewer")
    return base / "viewer"


def _artifacts() -> Path:
    out = Path(os.environ.get("REACTLAB_TEST_ARTIFACTS", ROOT / "results" / "test-artifacts"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_index_dom_links_every_run(chromium: str, site: Path, tmp_path: Path) -> None:
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom",
                   (site / "index.html").as_uri()).stdout
    tree = parse(dom)
    expected = sorted([f"{t}/{b}/{s}.html" for t, b, s in RUNS]
                      + ["hostil/openai/texto_hostil.html"])
    # the run list's script rendered its rows (its first page holds them all); the other
    # links are the index's own table of contents
    pages = [link for link in tree.links if not link.startswith("#")]
    assert sorted(pages) == expected
    assert {link for link in tree.links if link.startswith("#")} == {"#lesson", "#runs"}
    for link in pages:  # every link resolves to a page the browser can open
        assert (site / link).is_file()


def test_page_dom_marks_the_finding(chromium: str, site: Path, tmp_path: Path) -> None:
    url = (site / "cierre_acme" / "openai" / "cierre_inventado.html").as_uri()
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", url).stdout
    tree = parse(dom)
    assert ("figure_without_source", "10") in tree.mark_texts
    assert {text for _, text in tree.mark_texts} == {"10"}
    assert 'class="finding"' in dom and "figure without a source: 10" in dom


def test_hostile_page_dom_has_no_injected_element(chromium: str, site: Path,
                                                  tmp_path: Path) -> None:
    url = (site / "hostil" / "openai" / "texto_hostil.html").as_uri()
    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", url).stdout
    assert "<script" not in dom.lower() and "<img" not in dom.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    tree = parse(dom)
    assert ("headline_not_verbatim", f'"{HOSTILE}"') in tree.mark_texts
    assert not [a for a, _ in tree.attrs if a.startswith("on")]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_screenshots_are_saved_and_show_the_highlight(chromium: str, site: Path,
                                                      tmp_path: Path) -> None:
    artifacts = _artifacts()
    shots = {"viewer-index.png": site / "index.html",
             "viewer-cierre_acme-openai-cierre_inventado.png":
                 site / "cierre_acme" / "openai" / "cierre_inventado.html"}
    for name, page in shots.items():
        tmp = tmp_path / name
        _browser(chromium, tmp_path / "profile", f"--screenshot={tmp}", "--window-size=1280,900",
                 page.as_uri())
        data = tmp.read_bytes()
        assert _png_size(data) == (1280, 900)
        assert len(data) > 20_000, f"{name}: {len(data)} bytes, the page looks empty"
        final = artifacts / name
        staged = final.with_name(f".{name}.tmp")
        shutil.copyfile(tmp, staged)
        os.replace(staged, final)
        print(f"screenshot: {final}")
    image = pytest.importorskip("PIL.Image")
    with image.open(artifacts / "viewer-cierre_acme-openai-cierre_inventado.png") as im:
        rgb = im.convert("RGB")
        colors = rgb.getcolors(maxcolors=rgb.width * rgb.height) or []
        pixels = sum(n for n, color in colors if color == FINDING_RGB)
    assert pixels > 50, "the highlighted finding is not visible in the screenshot"
