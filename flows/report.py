"""Stage `report`: the comparison of methods in `reports/` (table, PNG curves, one HTML page).

Reads every `data/eval/<name>/metrics.json` and `data/plots/<method>/*.json`; writes
`reports/summary.md`, `reports/metrics.json`, `reports/*.png` and `reports/index.html` (images
embedded, so it renders offline, unlike `dvc plots show`), and logs them to an MLflow run.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import read_json, write_json
from core.params import Params, load

HEADLINE = ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
            "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence"]


def collect(names: list[str]) -> dict[str, dict]:
    out = {}
    for name in names:
        f = paths.eval_dir(name) / "metrics.json"
        if f.exists():
            out[name] = read_json(f)
    return out


def table(metrics: dict[str, dict]) -> str:
    cols = [c for c in HEADLINE if any(c in m for m in metrics.values())]
    lines = ["| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, m in metrics.items():
        cells = [f"{m[c]:.3f}" if c in m else "" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_curves(methods: list[str], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for fname, key, ylabel in (("train.json", "reward", "train reward (mean)"),
                               ("heldout.json", None, "held-out score (val)")):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        drawn = False
        for m in methods:
            f = paths.plots_dir(m) / fname
            if not f.exists():
                continue
            rows = read_json(f)
            if not rows:
                continue
            k = key or next((c for c in rows[0] if c.endswith("pass@1") or c.endswith("/coverage")), None)
            if k is None:
                continue
            ax.plot([r["step"] for r in rows], [r.get(k) for r in rows], marker=".", label=m)
            drawn = True
        if drawn:
            ax.set_xlabel("GRPO step")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend()
            fig.tight_layout()
            path = out_dir / fname.replace(".json", ".png")
            fig.savefig(path, dpi=110)
            made.append(path)
        plt.close(fig)
    return made


def html_page(md_table: str, images: list[Path]) -> str:
    rows = [r for r in md_table.splitlines() if not r.startswith("|---")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cells[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in cells[1:])
    imgs = "".join(f'<figure><img alt="{p.stem}" src="data:image/png;base64,'
                   f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{p.stem}</figcaption></figure>'
                   for p in images)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Reward methods compared</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #999;padding:4px 8px;text-align:right}</style></head><body>"
            f"<h1>Reward methods compared</h1><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{imgs}</body></html>")


def report(params: Params, out_dir: Path = paths.REPORTS) -> dict:
    from tasks import tracking

    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = collect(["base", *params.methods])
    md = table(metrics)
    images = plot_curves(params.methods, out_dir)
    (out_dir / "summary.md").write_text(md + "\n")
    write_json(out_dir / "metrics.json", metrics)
    (out_dir / "index.html").write_text(html_page(md, images))
    tracking.setup()
    with tracking.run("report", {"stage": "report", "git_commit": tracking.git_commit()}):
        tracking.log_artifacts(out_dir)
    return metrics


@flow(name="report", log_prints=True)
def report_flow(preset: str | None = None) -> dict:
    """Build the comparison report."""
    return report(load(preset=preset))


def main() -> None:
    args = parser(__doc__).parse_args()
    metrics = report(load(args.params, preset=args.preset))
    print(table(metrics))


if __name__ == "__main__":
    run_main(main)
