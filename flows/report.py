"""Stage `report`: the comparison of methods in `reports/` (table, PNG curves, one HTML page).

Reads `data/eval/base/metrics.json`, every `data/eval/<method>/seed<S>/metrics.json` and
`data/plots/<method>/seed<S>/*.json`; with several seeds a cell is `mean ± std (n)`. Writes
`reports/summary.md`, `reports/metrics.json`, `reports/*.png` and `reports/index.html` (images
embedded, so it renders offline, unlike `dvc plots show`), and logs them to an MLflow run.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np
from prefect import flow

from core import paths
from core.cli import parser, run_main
from core.io import read_json, write_json
from core.params import Params, load

HEADLINE = ["arith/pass@1", "arith/greedy_accuracy", "arith/pass@k", "arith/mean_length",
            "arith_cf/cheat_rate", "facts/coverage", "facts/style_adherence"]


def collect(methods: list[str], seeds: list[int]) -> dict[str, list[dict]]:
    """method -> the metrics of each seed that has been evaluated (`base`: one entry)."""
    out = {}
    for name, runs in [("base", [None]), *[(m, seeds) for m in methods]]:
        found = [read_json(f) for s in runs if (f := paths.eval_dir(name, s) / "metrics.json").exists()]
        if found:
            out[name] = found
    return out


def aggregate(metrics: dict[str, list[dict]]) -> dict[str, dict]:
    """Per method and metric: mean, population std and the number of seeds."""
    agg = {}
    for name, runs in metrics.items():
        keys = sorted({k for r in runs for k in r})
        agg[name] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
                     for k in keys if (v := [r[k] for r in runs if k in r])}
    return agg


def table(agg: dict[str, dict]) -> str:
    cols = [c for c in HEADLINE if any(c in m for m in agg.values())]
    lines = ["| method | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, m in agg.items():
        cells = []
        for c in cols:
            if c not in m:
                cells.append("")
            elif m[c]["n"] > 1:
                cells.append(f"{m[c]['mean']:.3f} ± {m[c]['std']:.3f} ({m[c]['n']})")
            else:
                cells.append(f"{m[c]['mean']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def collapse_events(method: str, seed: int) -> list[dict]:
    f = paths.checkpoint_dir(method, seed) / "run.json"
    return read_json(f).get("collapse_events", []) if f.exists() else []


def plot_curves(methods: list[str], seeds: list[int], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for fname, key, ylabel in (("train.json", "reward", "train reward (mean)"),
                               ("heldout.json", None, "held-out score (val)")):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        drawn = False
        for i, m in enumerate(methods):
            for j, s in enumerate(seeds):
                f = paths.plots_dir(m, s) / fname
                rows = read_json(f) if f.exists() else []
                k = key or next((c for c in (rows[0] if rows else {})
                                 if c.endswith("pass@1") or c.endswith("/coverage")), None)
                if not rows or k is None:
                    continue
                ax.plot([r["step"] for r in rows], [r.get(k) for r in rows], marker=".",
                        color=f"C{i}", alpha=1.0 if j == 0 else 0.5, label=m if j == 0 else None)
                for e in collapse_events(m, s):
                    ax.axvline(e["step"], color=f"C{i}", linestyle="--", alpha=0.7)
                    ax.annotate(e["kind"], (e["step"], ax.get_ylim()[1]), color=f"C{i}",
                                fontsize=7, rotation=90, va="top")
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
    agg = aggregate(collect(params.methods, params.seeds))
    md = table(agg)
    images = plot_curves(params.methods, params.seeds, out_dir)
    (out_dir / "summary.md").write_text(md + "\n")
    write_json(out_dir / "metrics.json", agg)
    (out_dir / "index.html").write_text(html_page(md, images))
    tracking.setup()
    with tracking.run("report", {"stage": "report", "git_commit": tracking.git_commit()}):
        tracking.log_artifacts(out_dir)
    return agg


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
