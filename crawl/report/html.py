"""The report as one self-contained HTML page: styles, script, data and charts inline.

Opened from a file with no network: nothing is fetched, no font, no
library. Charts are SVG drawn here. Tables are rendered by a small script
from JSON embedded in the page, 50 rows at a time with a filter box, so a
section of 100,000 rows stays usable (the DOM never holds more than a page
of it). The script marks what it rendered on each section
(``data-rows``/``data-rendered``) and sets ``data-report="ok"`` on the root
element when it is done, which is what the browser test checks.
"""

from __future__ import annotations

import html
from typing import Any

import orjson

from .model import Report

W, H = 560, 200  # chart size in px
_COLORS = ("#2f7d32", "#1565c0", "#ef6c00", "#c62828", "#757575")


def _e(v: object) -> str:
    return html.escape(str(v), quote=True)


def _json(data: object) -> str:
    # inside <script type="application/json">: only "</" could end the element early
    return orjson.dumps(data, default=str).decode().replace("</", "<\\/")


def _axes(ymax: float, label: str) -> str:
    return (f'<line x1="40" y1="{H - 20}" x2="{W - 10}" y2="{H - 20}" stroke="#999"/>'
            f'<line x1="40" y1="10" x2="40" y2="{H - 20}" stroke="#999"/>'
            f'<text x="4" y="16" class="ax">{ymax:,.0f}</text>'
            f'<text x="4" y="{H - 22}" class="ax">0</text>'
            f'<text x="{W - 10}" y="{H - 4}" class="ax" text-anchor="end">{_e(label)}</text>')


def line_chart(title: str, points: list[tuple[float, float, float]], names: tuple[str, str]) -> str:
    """Two series over time: (x, y1, y2) per point."""
    if not points:
        return f'<figure><figcaption>{_e(title)}: no data</figcaption></figure>'
    xs = [p[0] for p in points]
    x0, x1 = min(xs), max(xs) or 1
    ymax = max(max(p[1], p[2]) for p in points) or 1
    span = (x1 - x0) or 1

    def path(i: int) -> str:
        pts = [(40 + (p[0] - x0) / span * (W - 50), H - 20 - p[i] / ymax * (H - 30)) for p in points]
        return " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)

    body = _axes(ymax, f"{span / 60:,.1f} min")
    for i, (name, color) in enumerate(zip(names, _COLORS, strict=False), start=1):
        body += f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path(i)}"><title>{_e(name)}</title></polyline>'
    legend = " ".join(f'<span class="key" style="background:{c}"></span>{_e(n)}'
                      for n, c in zip(names, _COLORS, strict=False))
    return (f'<figure><figcaption>{_e(title)} {legend}</figcaption>'
            f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{_e(title)}">{body}</svg></figure>')


def bar_chart(title: str, bars: list[tuple[str, list[float]]], names: tuple[str, ...] = ("count",)) -> str:
    """Stacked bars: (label, [value per series])."""
    if not bars:
        return f'<figure><figcaption>{_e(title)}: no data</figcaption></figure>'
    ymax = max(sum(v) for _, v in bars) or 1
    n = len(bars)
    bw = (W - 50) / n
    body = _axes(ymax, "")
    for i, (label, values) in enumerate(bars):
        x = 40 + i * bw
        y = H - 20
        for j, v in enumerate(values):
            h = v / ymax * (H - 30)
            y -= h
            body += (f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
                     f'fill="{_COLORS[j % len(_COLORS)]}"><title>{_e(label)}: {_e(names[j % len(names)])} '
                     f'{v:,.0f}</title></rect>')
        if n <= 12:
            body += (f'<text x="{x + bw / 2:.1f}" y="{H - 6}" class="ax" text-anchor="middle">'
                     f'{_e(str(label)[:10])}</text>')
    legend = " ".join(f'<span class="key" style="background:{_COLORS[j]}"></span>{_e(nm)}'
                      for j, nm in enumerate(names)) if len(names) > 1 else ""
    return (f'<figure><figcaption>{_e(title)} {legend}</figcaption>'
            f'<svg viewBox="0 0 {W} {H}" role="img" aria-label="{_e(title)}">{body}</svg></figure>')


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
nav a{margin-right:.8em}.cards{display:flex;flex-wrap:wrap;gap:.6em}
.card{border:1px solid #ddd;border-radius:6px;padding:.5em .8em}.card b{display:block;font-size:1.3em}
figure{display:inline-block;margin:.5em;width:560px;max-width:100%;vertical-align:top}svg{width:100%;background:#fafafa}
.ax{font-size:10px;fill:#666}.key{display:inline-block;width:10px;height:10px;margin:0 3px 0 8px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eee;
padding:2px 6px;text-align:left;vertical-align:top;word-break:break-all}th{background:#f4f4f4}
.pager{margin:.4em 0}.pager button{margin:0 .3em}input.filter{width:20em}.none{color:#777}
details{font-size:12px}
"""

_JS = r"""
(function(){
  const PAGE = 50;
  function cell(v){
    const td = document.createElement('td');
    if (v === null || v === undefined) return td;
    if (Array.isArray(v)) {
      if (v.length && typeof v[0] === 'object') {
        const d = document.createElement('details');
        const s = document.createElement('summary');
        s.textContent = v.length + ' item' + (v.length === 1 ? '' : 's');
        d.appendChild(s);
        const ul = document.createElement('ul');
        for (const item of v.slice(0, 200)) {
          const li = document.createElement('li');
          li.textContent = Object.values(item).filter(x => x !== null && x !== '').join(' \u2014 ');
          ul.appendChild(li);
        }
        if (v.length > 200) { const li = document.createElement('li'); li.textContent = '\u2026 ' + (v.length - 200) + ' more (CSV has all)'; ul.appendChild(li); }
        d.appendChild(ul); td.appendChild(d);
      } else td.textContent = v.join(' \u2192 ');
    } else if (typeof v === 'boolean') td.textContent = v ? 'yes' : '';
    else if (typeof v === 'number') td.textContent = v.toLocaleString('en');
    else td.textContent = String(v);
    return td;
  }
  function section(el){
    const data = JSON.parse(document.getElementById('data-' + el.id).textContent);
    const cols = data.columns, all = data.rows;
    let rows = all, page = 0;
    const box = el.querySelector('.table');
    const info = document.createElement('span');
    const filter = document.createElement('input');
    filter.className = 'filter'; filter.placeholder = 'filter rows';
    const prev = document.createElement('button'); prev.textContent = '\u2190 previous';
    const next = document.createElement('button'); next.textContent = 'next \u2192';
    const pager = document.createElement('div'); pager.className = 'pager';
    pager.append(filter, prev, next, info);
    const table = document.createElement('table');
    const head = document.createElement('tr');
    for (const c of cols) { const th = document.createElement('th'); th.textContent = c; head.appendChild(th); }
    const thead = document.createElement('thead'); thead.appendChild(head);
    const tbody = document.createElement('tbody');
    table.append(thead, tbody);
    box.append(pager, table);
    function draw(){
      tbody.textContent = '';
      const start = page * PAGE;
      for (const r of rows.slice(start, start + PAGE)) {
        const tr = document.createElement('tr');
        for (const c of cols) tr.appendChild(cell(r[c]));
        tbody.appendChild(tr);
      }
      info.textContent = rows.length ? (start + 1) + '\u2013' + Math.min(rows.length, start + PAGE) + ' of ' + rows.length.toLocaleString('en') : 'no rows';
      prev.disabled = page === 0; next.disabled = start + PAGE >= rows.length;
      el.dataset.rendered = String(tbody.children.length);
    }
    prev.onclick = () => { page--; draw(); };
    next.onclick = () => { page++; draw(); };
    filter.oninput = () => {
      const q = filter.value.toLowerCase();
      rows = q ? all.filter(r => JSON.stringify(r).toLowerCase().includes(q)) : all;
      page = 0; draw();
    };
    el.dataset.rows = String(all.length);
    draw();
  }
  for (const el of document.querySelectorAll('section.report')) section(el);
  document.documentElement.dataset.report = 'ok';
})();
"""


def page(report: Report) -> str:
    """The whole report as one HTML document."""
    o = report.overview
    p = report.plots
    cards = [("URLs", o["urls"]), ("hosts", o["hosts"]), ("pages stored", o["pages_ok"]),
             ("broken links", o["broken_links"]), ("redirect chains", o["redirect_chains"]),
             ("duplicate clusters", o["duplicate_clusters"]), ("MB", round(o["bytes"] / 1e6, 1))]
    charts = [
        line_chart("Fetches and errors per minute", p["rate"], ("fetches", "errors")),
        bar_chart("Latency", [(lab, [n]) for lab, n in p["latency"]], ("pages",)),
        bar_chart("Status mix, busiest hosts", [(h, [a, b, c, d, e]) for h, a, b, c, d, e in p["status_mix"]],
                  ("2xx", "3xx", "4xx", "5xx", "other")),
        bar_chart("Depth", [(str(d), [n]) for d, n in p["depth"]], ("URLs",)),
        bar_chart("Duplicate cluster sizes", [(str(s), [n]) for s, n in p["cluster_sizes"]], ("clusters",)),
    ]
    nav = " ".join(f'<a href="#{_e(n)}">{_e(s.title)}</a>' for n, s in report.sections.items())
    parts = []
    for name, sec in report.sections.items():
        count = sec.total if sec.total is not None else len(sec.rows)
        note = f' <span class="none">({_e(sec.note)})</span>' if sec.note else ""
        parts.append(
            f'<section class="report" id="{_e(name)}" data-count="{count}">'
            f'<h2>{_e(sec.title)}: {count:,}{note}</h2><div class="table"></div>'
            f'<script type="application/json" id="data-{_e(name)}">'
            f'{_json({"columns": sec.columns, "rows": sec.rows})}</script></section>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>crawl report: {_e(o["dir"])}</title><style>{_CSS}</style></head><body>'
        f'<h1>crawl report</h1><p>{_e(o["dir"])}</p>'
        '<div class="cards">' + "".join(f'<div class="card"><b>{v:,}</b>{_e(k)}</div>' for k, v in cards)
        + f'</div><nav>{nav}</nav><div class="charts">{"".join(charts)}</div>{"".join(parts)}'
        f'<script>{_JS}</script></body></html>\n'
    )


def write(report: Report, path: Any) -> None:
    from pathlib import Path

    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page(report), encoding="utf-8")
    tmp.replace(out)
