"""`inferstack plan --plot`: the files it writes, read back as a browser or an image viewer would read them."""

import json
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from inferstack.plot import cost_latency_frontier  # matplotlib: the `plot` extra, part of the dev install

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ROOT / "examples" / "workloads"
SVG = "{http://www.w3.org/2000/svg}"
SLO_RED = (0xC0, 0x00, 0x00)


def inferstack(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inferstack.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=180
    )


@pytest.fixture(scope="module")
def chat_70b_svg(tmp_path_factory):
    """chat-70b planned with --plot to an SVG, and the JSON report of the same run."""
    path = tmp_path_factory.mktemp("plot") / "chat-70b.svg"
    result = inferstack("plan", str(WORKLOADS / "chat-70b.yaml"), "--plot", str(path), "--json")
    assert result.returncode == 0, result.stderr
    return ET.parse(path).getroot(), json.loads(result.stdout), result


def svg_text(root: ET.Element) -> str:
    return "\n".join("".join(element.itertext()) for element in root.iter(f"{SVG}text"))


def test_the_svg_names_each_clouds_chosen_plan_and_marks_the_best(chat_70b_svg):
    root, report, _ = chat_70b_svg
    assert root.tag == f"{SVG}svg"
    text = svg_text(root)
    best = report["best"]
    assert f"best: {best['instance_count']}x {best['instance_type']} ({best['cloud']})" in text
    for outcome in report["clouds"]:
        chosen = outcome["chosen"]
        if chosen and chosen["price"]["monthly_ranking"]:
            assert f"{chosen['instance_count']}x {chosen['instance_type']} ({chosen['cloud']})" in text
            assert root.find(f".//*[@id='chosen-{chosen['cloud']}-ttft_p95_ms']") is not None


def test_the_svg_draws_the_ttft_and_tpot_targets_the_frontier_and_the_headroom_limit(chat_70b_svg):
    root, _, _ = chat_70b_svg
    text = svg_text(root)
    assert "TTFT target 2,000 ms" in text and "TPOT target 80 ms" in text  # chat-70b's slo block
    assert "least headroom the planner keeps 20 %" in text
    for gid in ("slo-ttft_p95_ms", "slo-tpot_p95_ms", "slo-headroom", "frontier-ttft_p95_ms"):
        group = root.find(f".//*[@id='{gid}']")
        assert group is not None and group.find(f".//{SVG}path") is not None, gid
    assert "monthly cost, USD (log scale)" in text and "p95 time to first token, ms" in text


def test_the_svg_counts_every_feasible_offer_and_the_json_keeps_the_usual_shortlist(chat_70b_svg):
    root, report, result = chat_70b_svg
    counted = re.search(r"(\d+) feasible priced offers \((\d+) more without a known price\)", svg_text(root))
    shortlisted = sum(1 + len(outcome["alternatives"]) for outcome in report["clouds"] if outcome["chosen"])
    assert counted is not None and int(counted.group(1)) + int(counted.group(2)) > shortlisted  # not the shortlist
    assert all(len(outcome["alternatives"]) <= 4 for outcome in report["clouds"])
    assert result.stderr.startswith("wrote ") and "Drawing" not in result.stderr  # no spinner in a pipe


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_png_of_an_encoder_plan_has_a_latency_and_a_headroom_panel_with_the_target_in_red(tmp_path):
    import matplotlib.image

    path = tmp_path / "bert.png"
    result = inferstack("plan", str(WORKLOADS / "embeddings-bert.yaml"), "--plot", str(path))
    assert result.returncode == 0, result.stderr
    assert png_size(path.read_bytes()) == (1200, 648)  # two panels, at least 10 in x 5.4 in at 120 dpi
    pixels = (matplotlib.image.imread(path)[:, :, :3] * 255).round().astype(int)
    red = ((pixels[:, :, 0] == SLO_RED[0]) & (pixels[:, :, 1] == SLO_RED[1]) & (pixels[:, :, 2] == SLO_RED[2]))
    assert red.sum(axis=0).max() > 200  # a vertical red line most of a panel high: the targets


def test_plot_to_a_file_that_is_neither_svg_nor_png_is_refused_before_planning(tmp_path):
    result = inferstack("plan", str(WORKLOADS / "chat-70b.yaml"), "--plot", str(tmp_path / "plan.pdf"))
    assert result.returncode == 2 and "must be a file name ending in .svg or .png" in result.stderr
    assert not (tmp_path / "plan.pdf").exists()


def test_plot_without_matplotlib_says_what_to_install_in_one_line(tmp_path):
    hide_matplotlib = (
        "import sys; sys.modules['matplotlib'] = None; from inferstack.cli import main; "
        f"raise SystemExit(main(['plan', {str(WORKLOADS / 'chat-70b.yaml')!r}, '--plot', "
        f"{str(tmp_path / 'p.svg')!r}]))"
    )
    result = subprocess.run([sys.executable, "-c", hide_matplotlib], capture_output=True, text=True, cwd=ROOT,
                            timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "pip install 'inferstack[plot]'" in result.stderr


def test_the_frontier_keeps_the_offers_no_other_beats_on_both_latency_and_cost():
    points = [(100, 900.0), (200, 500.0), (150, 950.0), (300, 500.0), (400, 100.0), (50, 2000.0)]
    assert cost_latency_frontier(points) == [(50, 2000.0), (100, 900.0), (200, 500.0), (400, 100.0)]


def test_plot_on_a_terminal_shows_progress_while_drawing(tmp_path):
    import os
    import pty

    primary, secondary = pty.openpty()
    env = {key: value for key, value in os.environ.items() if key != "CI"} | {"TERM": "xterm", "COLUMNS": "100"}
    process = subprocess.Popen(
        [sys.executable, "-m", "inferstack.cli", "plan", str(WORKLOADS / "chat-70b.yaml"), "--cloud", "gcp",
         "--plot", str(tmp_path / "p.svg")], stdout=secondary, stderr=secondary, cwd=ROOT, env=env)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: the process has exited
            break
        if not chunk:
            break
        seen += chunk
    assert process.wait(timeout=120) == 0
    assert f"Drawing {tmp_path / 'p.svg'}…".encode() in seen and b"wrote " in seen

