"""The report as a reader sees it: `python -m flows.report` on a synthetic data folder, rendered by
headless Chromium with the network cut off (screenshot not blank, the answer on the first screen,
every method in the rendered tables, every Vega-Lite chart drawn by the inlined vega-embed), and
the report folder logged to MLflow; `dvc plots show` rendered offline with the repository's
template. Skips only when no Chromium binary exists (`.ci/run` installs one)."""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

from core.params import ROOT
from flows import alarms
from tests.test_report import METRICS, as_dicts, make_data, parse_tables

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
            "chromium-headless-shell")


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def chromium(binary: str, profile: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium refuses to start with its sandbox.
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)


# No network: every connection goes to a closed port and no name resolves; the virtual-time budget
# lets the page's scripts (vega-embed drawing the charts) finish before the dump or screenshot.
OFFLINE = ("--disable-background-networking", "--proxy-server=127.0.0.1:9",
           "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=15000")


def pixel_stats(png: bytes) -> tuple[float, float]:
    """(grey-level variance, share of non-white pixels) of a PNG screenshot."""
    try:
        from PIL import Image
    except ImportError:  # pillow comes with matplotlib; without it, judge the filtered scanlines
        return _filtered_stats(png)
    import numpy as np

    grey = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(grey.var()), float((grey < 245).mean())


def _filtered_stats(png: bytes) -> tuple[float, float]:
    """Rough stand-in without pillow: a blank page's filtered scanlines are almost all zero bytes."""
    pos, idat = 8, b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind == b"IDAT":
            idat += png[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    nonzero = sum(1 for b in raw[::7] if b) / max(1, len(raw[::7]))
    mean = sum(raw[::7]) / max(1, len(raw[::7]))
    return sum((b - mean) ** 2 for b in raw[::7]) / max(1, len(raw[::7])), nonzero


@pytest.fixture(scope="module")
def browser():
    binary = find_chromium()
    if binary is None:
        pytest.skip(f"no Chromium binary on PATH (looked for {', '.join(BROWSERS)}); "
                    f".ci/run installs one with apt-get (scripts/ensure_chromium.sh)")
    return binary


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The report built by the stage's CLI, logged to a throwaway MLflow store."""
    root = tmp_path_factory.mktemp("report")
    data = make_data(root)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    from mlflow.tracking import MlflowClient

    # The experiment is made here so its artifacts land in the temporary folder: tracking.setup()
    # would otherwise create it with the repository's mlflow/artifacts as its location.
    MlflowClient(tracking_uri=uri).create_experiment("nolabel-rl-lab",
                                                     artifact_location=(root / "artifacts").as_uri())
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="nolabel-rl-lab",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("LAB_PRESET", None)
    r = subprocess.run([sys.executable, "-m", "flows.report", "--preset", "ci", "--data-dir", str(data),
                        "--out-dir", str(root / "reports")], check=False, cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "| rlvr |" in r.stdout
    return root, uri


ALARMS = "Collapse alarms: how often they are right"
# The alarms' tables under their label's heading (flows/report.py, alarms_html).
ALARM_LABELS = ("Against a label no alarm reads (the test split)", "Against the lab detector's own held-out rule")


def test_report_renders_in_headless_chromium(browser, built, tmp_path) -> None:
    root, _ = built
    page = (root / "reports" / "index.html").resolve()
    shot = tmp_path / "report.png"
    r = chromium(browser, tmp_path / "profile", *OFFLINE, f"--screenshot={shot}", "--window-size=1280,1800",
                 page.as_uri())
    assert shot.exists() and shot.stat().st_size > 5000, r.stderr[-2000:]
    variance, inked = pixel_stats(shot.read_bytes())
    assert variance > 100 and inked > 0.02, (variance, inked)  # text, tables and charts drawn

    dom = chromium(browser, tmp_path / "profile", *OFFLINE, "--dump-dom", page.as_uri()).stdout
    tables = parse_tables(dom)
    methods = {"base", *METRICS}
    # Every table lists methods, but these: the collapse events, the claims (a row per claim) and
    # the collapse alarms' error rates (a row per alarm; against the independent label and against
    # the detector's own rule when the runs have the independent label, else one table).
    alarm_tables = [c for c in (ALARMS, *ALARM_LABELS) if c in tables]
    per_row = {"Collapse events", "The papers' claims", *alarm_tables}
    # (A one-cell row is a headline table's group heading: label-free, reads labels, the floor.)
    listed = {name for caption, rows in tables.items() if caption not in per_row
              for name, row in as_dicts(rows).items() if len(row) > 1}
    assert listed == methods, (listed, sorted(tables))
    assert alarm_tables and all(set(as_dicts(tables[c])) == set(alarms.TITLES.values()) for c in alarm_tables)
    assert set(as_dicts(tables["arith"])) == {"base", "rlvr", "random", "rlme_long"}
    # Every chart drawn offline by the inlined vega-embed (an <svg> of marks in each figure), none
    # failed; the collapse markers' labels are drawn text of the charts.
    figures = re.findall(r'<figure class="vl[^"]*".*?</figure>', dom, flags=re.DOTALL)
    assert len(figures) >= 8, len(figures)
    assert all('class="vl-view' in f and "drawn" in f.split(">", 1)[0] and re.search(r'<svg[^>]*class="marks"', f)
               for f in figures), [f[:200] for f in figures if "drawn" not in f.split(">", 1)[0]][:3]
    assert not any("failed" in f.split(">", 1)[0] for f in figures)
    drawn_text = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", dom))
    assert "reward_hacking" in drawn_text and "GRPO step" in drawn_text


def test_the_first_screen_answers_which_method_won(browser, built, tmp_path) -> None:
    """At 1280×900 the reader sees the header, the smoke banner (the ci preset), the key (the tie
    rule and the collapse label) and the headline table, its label-free best and its ceiling."""
    root, _ = built
    page = (root / "reports" / "index.html").resolve()
    shot = tmp_path / "first_screen.png"
    chromium(browser, tmp_path / "profile", *OFFLINE, f"--screenshot={shot}", "--window-size=1280,900",
             page.as_uri())
    assert shot.exists() and shot.stat().st_size > 5000
    # What lies above the fold, by layout: the rendered page's elements with their offsets. The
    # probe goes before the page's own last </body> (the inlined Vega scripts contain the string).
    probe = tmp_path / "probe.html"
    text = page.read_text(encoding="utf-8")
    end = text.rindex("</body>")
    probe.write_text(text[:end] + _PROBE + text[end:], encoding="utf-8")
    dom = chromium(browser, tmp_path / "profile", *OFFLINE, "--window-size=1280,900", "--dump-dom",
                   probe.as_uri()).stdout
    tops = dict(re.findall(r"<li data-probe=\"([^\"]+)\">(-?\d+)</li>", dom))
    shown = ("provenance", "smoke", "key", "headline-arith", "best", "ceiling")
    assert set(tops) >= set(shown), tops
    assert all(int(tops[k]) < 900 for k in shown), tops
    assert "arith: pass@1" in dom and "Which reward can you trust without labels?" in dom
    assert re.search(r'<tr class="best" data-method="random"><td>.*?</td><td class="reads">nothing</td>'
                     r'<td title="[^"]*"><span class="mark"[^>]*>★ </span>0\.100</td>', dom)
    assert re.search(r'<tr class="ceiling" data-method="rlvr">.*?★ </span>0\.500 ± 0\.100</td>', dom)


def test_unticking_a_method_hides_its_lines_in_the_charts(browser, built, tmp_path) -> None:
    """The legend's checkbox reaches the drawn charts: rlvr's two seeds leave the entropy chart."""
    root, _ = built
    text = (root / "reports" / "index.html").read_text(encoding="utf-8")
    end = text.rindex("</body>")
    probe = tmp_path / "untick.html"
    probe.write_text(text[:end] + _UNTICK + text[end:], encoding="utf-8")
    dom = chromium(browser, tmp_path / "profile", *OFFLINE, "--dump-dom", probe.as_uri()).stdout
    counts = re.search(r'<pre id="untick">before (\d+) after (\d+)</pre>', dom)
    assert counts, dom[-2000:]
    assert (int(counts.group(1)), int(counts.group(2))) == (5, 3)  # 4 methods, rlvr with 2 seeds


# Counts the entropy chart's drawn lines, unticks rlvr in the legend, counts again.
_UNTICK = """<pre id="untick"></pre><script>
function lines() {
  return document.querySelectorAll('figure[aria-label="train: entropy"] svg.marks g.mark-line path').length;
}
setTimeout(function () {
  var before = lines(), box = document.querySelector('.legend input[data-method="rlvr"]');
  box.checked = false;
  box.dispatchEvent(new Event('change'));
  setTimeout(function () { document.getElementById('untick').textContent = 'before ' + before + ' after ' + lines(); },
             1500);
}, 3000);
</script>"""


# Appends, after rendering, each element's distance from the page top (in CSS pixels).
_PROBE = """<ul id="probe"></ul><script>
[['provenance', '#provenance'], ['smoke', '#smoke'], ['key', 'p.key + p.key'],
 ['headline-arith', '#headline-arith'], ['best', 'table.headline tr.best'],
 ['ceiling', 'table.headline tr.ceiling']].forEach(function (p) {
  var el = document.querySelector(p[1]);
  if (!el) return;
  var li = document.createElement('li');
  li.dataset.probe = p[0];
  li.textContent = Math.round(el.getBoundingClientRect().bottom + window.scrollY);
  document.getElementById('probe').appendChild(li);
});
</script>"""


def test_dvc_plots_show_renders_offline(browser, tmp_path) -> None:
    """`dvc plots show` in a copy of the pipeline files and the committed curves: the page inlines
    Vega (.dvc/config `plots.html_template`), and every chart draws with the network cut off."""
    work = tmp_path / "repo"
    work.mkdir()
    dvc = str(Path(sys.executable).with_name("dvc"))
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=work, check=True, env=env)
    for name in ("dvc.yaml", "params.yaml", ".dvc/config"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(ROOT / "docs" / "vega", work / "docs" / "vega")
    shutil.copytree(ROOT / ".dvc" / "plots", work / ".dvc" / "plots")
    archive = subprocess.run(["git", "archive", "HEAD", "data/plots"], cwd=ROOT, capture_output=True)
    if archive.returncode == 0:  # the committed curves, whatever a running pipeline is rewriting
        tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(work)
    else:
        shutil.copytree(ROOT / "data" / "plots", work / "data" / "plots")
    r = subprocess.run([dvc, "plots", "show", "-o", "out"], cwd=work, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    html = (work / "out" / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html and not re.search(r"<script[^>]*src=", html)
    offline = OFFLINE
    page = (work / "out" / "index.html").as_uri()
    dom = chromium(browser, tmp_path / "profile", *offline, "--dump-dom", page).stdout
    top_level = ("held-out arith pass@1", "held-out facts coverage", "held-out pairs outcome_acc",
                 "held-out pairs rc")
    assert all(title in html for title in top_level)
    drawn = dom.count('class="marks"')  # vega-embed's canvas (or svg), one per chart drawn
    assert drawn >= len(top_level) and drawn == html.count("vegaEmbed("), (drawn, html.count("vegaEmbed("))
    shot = tmp_path / "dvc_plots.png"
    chromium(browser, tmp_path / "profile", *offline, f"--screenshot={shot}", "--window-size=1400,1000", page)
    variance, inked = pixel_stats(shot.read_bytes())
    assert variance > 100 and inked > 0.02, (variance, inked)


def test_report_folder_is_an_mlflow_artifact(built) -> None:
    from mlflow.tracking import MlflowClient

    _, uri = built
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("nolabel-rl-lab")
    runs = client.search_runs([exp.experiment_id], "tags.stage = 'report'")
    assert len(runs) == 1
    arts = {a.path for a in client.list_artifacts(runs[0].info.run_id, "reports")}
    assert {"reports/index.html", "reports/summary.md", "reports/metrics.json"} <= arts
