"""Write docs/vega/plots_template.html: the HTML template of `dvc plots show` with Vega inlined.

DVC's default page loads Vega, Vega-Lite and Vega-Embed from cdn.jsdelivr.net, so it renders
nothing offline. `.dvc/config` (`plots.html_template`) points DVC at this template instead: the
three minified bundles inlined (about 830 kB), DVC's `{plot_divs}` placeholder where the charts go
and no `{scripts}` placeholder, so DVC's CDN `<script>` tags are dropped. The page that
`dvc plots show` writes (dvc_plots/index.html) is then one self-contained file.

Regenerate it (for another Vega version) from npm packages:

    cd /tmp && npm install vega@5 vega-lite@5 vega-embed@6
    python docs/vega/build_template.py /tmp/node_modules

Vega, Vega-Lite and Vega-Embed are BSD-3-Clause (University of Washington Interactive Data Lab);
their licence texts are copied into the template's head.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent / "plots_template.html"
BUNDLES = [("vega", "build/vega.min.js"), ("vega-lite", "build/vega-lite.min.js"),
           ("vega-embed", "build/vega-embed.min.js")]

PAGE = """<!DOCTYPE html>
<!-- DVC plots template with Vega inlined: renders offline. Written by docs/vega/build_template.py
     (do not edit by hand). Bundled: {versions}.
{licenses}
-->
<html>
<head>
    <meta charset="utf-8">
    {{refresh_tag}}
    <title>DVC plots</title>
    <style>
        body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; }}
        body > div {{ display: inline-block; vertical-align: top; margin: 0 1em 1em 0; }}
        p.note {{ color: #555; }}
    </style>
{scripts}
</head>
<body>
    <h1>DVC plots</h1>
    <p class="note">Written by <code>dvc plots show</code> (or <code>diff</code>) with
    docs/vega/plots_template.html: {versions}, inlined (no network).</p>
    {{plot_divs}}
</body>
</html>
"""


def build(node_modules: Path, out: Path = OUT) -> Path:
    versions, licenses, scripts = [], [], []
    for name, build_file in BUNDLES:
        pkg = node_modules / name
        meta = json.loads((pkg / "package.json").read_text(encoding="utf-8"))
        version = meta["version"]
        js = (pkg / build_file).read_text(encoding="utf-8")
        for bad in ("</script", "<!--", "{plot_divs}", "{scripts}", "{refresh_tag}"):
            if bad in js:  # would end the inline script early or be filled in by DVC
                raise ValueError(f"{pkg / build_file} contains {bad!r}; cannot inline it")
        versions.append(f"{name} {version}")
        if (pkg / "LICENSE").exists():
            lic = (pkg / "LICENSE").read_text(encoding="utf-8").strip().replace("--", "- -")
        else:  # the vega package ships no LICENSE file; its package.json names the licence
            lic = (f"{meta.get('license', '?')}, {meta.get('author', '?')} (from its package.json; "
                   f"the licence text is the one reproduced for the other bundles)")
        licenses.append(f"{name} {version}:\n{lic}")
        scripts.append(f"    <script>/* {name} {version} */\n{js}\n    </script>")
    page = PAGE.format(versions=", ".join(versions), licenses="\n\n".join(licenses),
                       scripts="\n".join(scripts))
    out.write_text(page, encoding="utf-8")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("node_modules", type=Path, help="a node_modules folder with vega, vega-lite, vega-embed")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    out = build(args.node_modules, args.out)
    print(f"wrote {out} ({out.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
