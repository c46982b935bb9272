"""One self-contained HTML page per report, for interviewers: verdict and score, per-category bars, the
diagnosis (hint first), pictures of what went wrong, every test with its diagnostics, and the submission's
source with syntax highlighting.

Self-contained: inline CSS, plots embedded as ``data:image/png;base64`` (matplotlib, Agg), no scripts, no
fonts, no external URL of any kind. Everything taken from the report is HTML-escaped: messages and
diagnostics carry candidate-controlled text.

Pictures (from the report's ``.npz`` sidecar, see harness/core/sidecar.py), for each kept failing test:
* |candidate − reference| over (position × feature) for the worst batch element: the output, then per head
  the context vectors before W_o (recovered through W_o⁻¹);
* the reference attention pattern per head next to the pattern the candidate's output implies, where that can
  be derived (otherwise the page says why not).
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import os
from pathlib import Path

import numpy as np

from harness.core import sidecar
from harness.core.audience import for_audience
from harness.core.report import Report, TestResult, batch_error
from harness.reports import plots as arts
from harness.reports.style import COLOUR, MARK, css_rules
from harness.reports.summary import category_scores, fmt, title_of

MAX_HEADS = 8
MAX_PLOTTED = 4          # tests with pictures per page (each picture costs ~0.2 s to render)
CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}
main{max-width:1120px;margin:0 auto;padding:24px}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:16px 20px;margin:16px 0}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:0 0 12px} h3{font-size:15px;margin:18px 0 8px}
.meta{color:#5b6475;font-size:13px} .meta code{font-size:12px}
.head{display:flex;align-items:center;gap:24px;flex-wrap:wrap}
.verdict{font-size:26px;font-weight:700;padding:6px 18px;border-radius:8px;color:#fff;letter-spacing:.04em}
.score{font-size:26px;font-weight:600} .score small{font-size:14px;color:#5b6475;font-weight:400}
.cat{display:grid;grid-template-columns:110px 1fr 190px;align-items:center;gap:12px;margin:6px 0}
.bar{background:#e9ecf1;border-radius:4px;height:16px;overflow:hidden}
.bar>span{display:block;height:100%;background:#1f9d55}
.bar.partial>span{background:#e0a526} .bar.zero>span{background:#cc2f3c}
.diag{border-left:4px solid #cc2f3c;padding:6px 14px;margin:10px 0;background:#fdf4f4}
.hint{font-weight:600;font-size:15px;margin:6px 0} .bug{font-family:ui-monospace,Menlo,Consolas,monospace;color:#8a1c26}
.diag h3.bug-title{margin:4px 0 2px;font-size:16px} .diag p.summary{margin:2px 0 6px;font-size:15px}
table.evidence{border-collapse:collapse;font-size:12px;margin:8px 0 4px}
table.evidence caption{text-align:left;color:#5b6475;font-size:12px;padding-bottom:2px}
table.evidence th,table.evidence td{padding:2px 10px 2px 0;text-align:left;vertical-align:top;font-weight:400}
table.evidence th{color:#5b6475;white-space:nowrap}
table.evidence code{background:#f2f4f7;padding:0 3px;border-radius:3px}
table.tests{border-collapse:collapse;width:100%;font-size:13px}
table.tests th,table.tests td{border-bottom:1px solid #e6e9ee;padding:6px 8px;text-align:left;vertical-align:top}
table.tests th{background:#f0f2f5}
.st{font-weight:700;font-size:12px;padding:1px 6px;border-radius:4px;color:#fff;white-space:nowrap}
.msg{margin:2px 0} .desc{color:#5b6475} .dl{margin:4px 0 0;font-size:12px;color:#333}
.dl code{background:#f2f4f7;padding:0 3px;border-radius:3px}
pre.tb{background:#f6f7f9;padding:8px;overflow:auto;font-size:12px;max-height:260px}
figure{margin:8px 0 16px} figure img{max-width:100%;border:1px solid #e6e9ee;border-radius:4px}
figcaption{color:#5b6475;font-size:13px;margin-top:4px}
.note{color:#5b6475;font-style:italic} .nw{white-space:nowrap}
.src{font-size:12.5px;overflow:auto} .src pre{margin:0;line-height:1.4} .src td.linenos{color:#9aa3b2;padding-right:10px}
""" + css_rules(".verdict", "background") + " " + css_rules(".st", "background")


def e(x) -> str:
    return html.escape(str(x), quote=True)


# -- plots ----------------------------------------------------------------------------------------------
def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h))  # fixed layout: constrained/tight layout triple the rendering time


def _index_ticks(ax) -> None:
    """Token (query/key position) and feature axes count things: integer ticks only, never 0.5."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def error_heatmaps(item: dict) -> tuple[str, str]:
    """|candidate − reference| over (position × feature): the output, and per head the contexts before W_o."""
    a, h = item["arrays"], int(item["h"])
    out, ref = a["out"], a["ref"]
    diff = np.abs(out - ref)
    diff = np.where(np.isfinite(diff), diff, np.nan)
    worst = np.nan_to_num(diff, nan=np.inf).reshape(diff.shape[0], -1).max(axis=1)
    bi = int(np.argmax(worst))
    ctx_c, ctx_r = arts.contexts(a, h, out), arts.contexts(a, h, ref)
    heads = min(h, MAX_HEADS) if ctx_c is not None and ctx_r is not None else 0
    d = out.shape[-1]
    fig = _figure(3.4 + 1.9 * heads, 2.9)
    axes = fig.subplots(1, 1 + heads, squeeze=False, gridspec_kw={"width_ratios": [1.6] + [1] * heads})[0]
    fig.subplots_adjust(left=0.07 if heads else 0.2, right=0.97, bottom=0.17, top=0.88, wspace=0.35)
    im = axes[0].imshow(diff[bi], aspect="auto", cmap="magma", interpolation="nearest")
    for k in range(1, h):
        axes[0].axvline(k * (d // h) - 0.5, color="white", lw=0.8, ls="--")
    axes[0].set_title(f"output |Δ| (batch {bi})", fontsize=9)
    axes[0].set_xlabel("feature", fontsize=8)
    axes[0].set_ylabel("position (query)", fontsize=8)
    fig.colorbar(im, ax=axes[0], shrink=0.85, pad=0.03)
    caption = (f"Absolute error of the output for batch element {bi} (the worst); dashed lines mark the head "
               f"slices of width d_k={d // h}.")
    if heads:
        dctx = np.abs(ctx_c[bi, :heads] - ctx_r[bi, :heads])
        vmax = float(np.nanmax(dctx)) if np.isfinite(dctx).any() else 1.0
        for hi in range(heads):
            ax = axes[1 + hi]
            im2 = ax.imshow(dctx[hi], aspect="auto", cmap="magma", interpolation="nearest", vmin=0,
                            vmax=vmax or 1.0)
            ax.set_title(f"head {hi}: context |Δ|", fontsize=9)
            ax.set_xlabel("feature (d_k)", fontsize=8)
            ax.set_yticks([])
        fig.colorbar(im2, ax=list(axes[1:]), shrink=0.85, pad=0.02)
        caption += (" Per head: the error of the context vectors before W_o, recovered through W_o⁻¹." if "wo" in a
                    else " Per head: the error of that head's output.")
    for ax in axes:
        ax.tick_params(labelsize=7)
        _index_ticks(ax)
    if heads:
        for ax in axes[1:]:
            ax.set_yticks([])
    return _png(fig), caption


def attention_patterns(item: dict) -> tuple[str, str]:
    """Reference attention weights per head (top row) next to what the candidate's output implies (bottom)."""
    a, h, g = item["arrays"], int(item["h"]), item.get("g")
    diff = np.nan_to_num(np.abs(a["out"] - a["ref"]), nan=np.inf)
    bi = int(np.argmax(diff.reshape(diff.shape[0], -1).max(axis=1)))
    p_ref = arts.reference_pattern(a, h, g)
    p_imp, note = arts.implied_pattern(a, h, g, a["out"], dtype=item.get("dtype", "float64"))
    heads = min(h, MAX_HEADS)
    rows = 2 if p_imp is not None else 1
    fig = _figure(1.6 + 2.4 * heads, 0.5 + 2.3 * rows)
    axes = fig.subplots(rows, heads, squeeze=False)
    fig.subplots_adjust(left=0.08 if heads > 1 else 0.2, right=0.86, bottom=0.12 if rows == 2 else 0.2,
                        top=0.9 if rows == 2 else 0.84, wspace=0.35, hspace=0.45)
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#d9d9d9")
    im = None
    for hi in range(heads):
        im = axes[0][hi].imshow(p_ref[bi, hi], vmin=0, vmax=1, cmap=cmap, interpolation="nearest")
        axes[0][hi].set_title(f"reference, head {hi}", fontsize=9)
        if rows == 2:
            axes[1][hi].imshow(np.clip(p_imp[bi, hi], -0.05, 1.05), vmin=0, vmax=1, cmap=cmap,
                               interpolation="nearest")
            axes[1][hi].set_title(f"candidate (implied), head {hi}", fontsize=9)
    for row in axes:
        for ax in row:
            ax.set_xlabel("key", fontsize=8)
            ax.tick_params(labelsize=7)
            _index_ticks(ax)
        row[0].set_ylabel("query", fontsize=8)
    fig.colorbar(im, ax=[ax for row in axes for ax in row], shrink=0.85, pad=0.02)
    caption = f"Attention weights for batch element {bi}: the reference per head"
    caption += (f", and below it the weights the candidate's output implies ({note}; grey rows are not a "
                f"mix of the reference values)." if p_imp is not None
                else f". The candidate's weights cannot be derived from its output here: {note}.")
    return _png(fig), caption


def _plot_order(items: list[dict]) -> list[dict]:
    """Tests whose implied attention pattern can be derived first (their pictures say more), else as kept."""
    def derivable(item):
        a = item["arrays"]
        try:
            p, _ = arts.implied_pattern(a, int(item["h"]), item.get("g"), a["out"], dtype=item.get("dtype", ""))
        except Exception:
            return False
        return p is not None

    return sorted(items, key=lambda i: not derivable(i))


# -- page -----------------------------------------------------------------------------------------------
def _source_block(source: str | None) -> str:
    if source is None:
        return '<p class="note">The submission source is not available (file moved or changed since grading).</p>'
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(source, PythonLexer(), HtmlFormatter(linenos="table", cssclass="src", wrapcode=True))


def find_source(report: Report, report_path: str | os.PathLike | None, source_path=None) -> str | None:
    """The submission's text, only if its sha256 matches the report's."""
    sub = report.submission
    candidates = [Path(source_path)] if source_path else []
    if sub.get("path") and not source_path:
        p = Path(sub["path"])
        candidates += [p] if p.is_absolute() else [Path.cwd() / p] + (
            [Path(report_path).resolve().parent / p] if report_path else [])
    for p in candidates:
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() == sub.get("sha256"):
            return data.decode("utf-8", errors="replace")
    return None


def _diagnostics_html(diag: dict) -> str:
    if not diag:
        return ""
    parts = []
    for key, value in diag.items():
        if key == "traceback":
            parts.append(f'<pre class="tb">{e(value)}</pre>')
        else:
            parts.append(f"<code>{e(key)}</code> {e(fmt(value))}")
    simple = [p for p in parts if not p.startswith("<pre")]
    pres = [p for p in parts if p.startswith("<pre")]
    return f'<div class="dl">{" · ".join(simple)}</div>' + "".join(pres)


EVIDENCE_LABELS = {"explained_wrong_outputs": "wrong outputs explained", "outputs_checked": "outputs checked",
                   "failing_tests_explained": "failing tests explained",
                   "max_abs_deviation_from_mutant": "max |candidate − this mistake|"}


def _evidence_table(evidence: dict) -> str:
    """The diagnosis evidence as a two-column table (label, value); lists as comma-separated code."""
    rows = []
    for key, value in evidence.items():
        label = EVIDENCE_LABELS.get(key, str(key).replace("_", " "))
        if isinstance(value, (list, tuple)):
            cell = ", ".join(f"<code>{e(fmt(v))}</code>" for v in value) or "–"
        else:
            cell = e(fmt(value))
        rows.append(f"<tr><th>{e(label)}</th><td>{cell}</td></tr>")
    return f'<table class="evidence"><caption>evidence</caption><tbody>{"".join(rows)}</tbody></table>'


def render_html(report: Report, *, audience: str = "interviewer", report_path=None, source_path=None) -> str:
    d = for_audience(report, audience)
    env, timings, sub = d.environment, d.timings, d.submission
    verdict = d.verdict
    pct = f" <small>({100 * d.score / d.max_score:.0f}%)</small>" if d.max_score else ""
    out = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           f'<meta name="viewport" content="width=device-width,initial-scale=1">'
           f"<title>{e(title_of(d))}: {e(verdict.upper())} {d.score:g}/{d.max_score:g}</title>"
           f"<style>{CSS}", _pygments_css(), "</style></head><body><main>"]
    # header
    out.append('<section class="head-section"><div class="head">'
               f'<div class="verdict {e(verdict)}" id="verdict">{e(verdict.upper())}</div>'
               f'<div class="score" id="score">{d.score:g} / {d.max_score:g}{pct}</div>'
               f'<div><h1>{e(title_of(d))}</h1><div class="meta">exercise <b>{e(d.exercise)}</b> · '
               f'{e(d.track)} track · {e(env.get("sandbox"))} sandbox · {timings.get("total_s", 0):.2f} s · '
               + (f'seed {e(env["seed"])} · ' if env.get("seed") is not None else "")   # not for candidates
               + f'harness {e(env.get("harness"))} · audience {e(audience)}<br>'
               f'sha256 <code>{e(sub.get("sha256", ""))}</code></div></div></div>')
    err = batch_error(d)
    if err:
        out.append(f'<p class="diag"><b>Not graded ({e(err.get("kind"))}):</b> {e(err.get("message", ""))}</p>')
    out.append("</section>")
    # categories
    cats = category_scores(d)
    if cats:
        out.append('<section id="categories"><h2>Score by category</h2>')
        for c in cats:
            frac = c["score"] / c["max_score"] if c["max_score"] else (1.0 if c["passed"] == c["total"] else 0.0)
            cls = "" if frac >= 0.999 else ("zero" if frac <= 0.001 else "partial")
            out.append(f'<div class="cat"><b>{e(c["category"])}</b><div class="bar {cls}">'
                       f'<span style="width:{100 * frac:.1f}%"></span></div>'
                       f'<span>{c["score"]:g}/{c["max_score"]:g} points · {c["passed"]}/{c["total"]} tests</span></div>')
        out.append("</section>")
    # diagnosis
    out.append('<section id="diagnosis"><h2>Diagnosis</h2>')
    if d.diagnosis:
        for diag in d.diagnosis:
            out.append(f'<div class="diag"><h3 class="bug-title"><span class="bug">{e(diag.bug)}</span></h3>'
                       f'<p class="summary">{e(diag.summary)}</p>')
            if diag.hint:
                out.append(f'<div class="hint">Hint: {e(diag.hint)}</div>')
            if diag.evidence:
                out.append(_evidence_table(diag.evidence))
            out.append("</div>")
    elif verdict == "passed":
        out.append('<p class="note">Nothing to diagnose: every test passed.</p>')
    else:
        out.append('<p class="note">No catalogued mistake reproduces these outputs; see the failing tests.</p>')
    out.append("</section>")
    # pictures
    items = sidecar.load(d.sidecar, report_path)
    if audience == "candidate":
        keep = {i["test_id"] for i in (d.sidecar or {}).get("items", [])}
        items = [i for i in items if i["test_id"] in keep]
    items = _plot_order(items)[:MAX_PLOTTED]
    if items:
        out.append('<section id="plots"><h2>Where the output goes wrong</h2>')
        for item in items:
            out.append(f'<h3>{e(item["test_id"])}</h3>')
            for make in (error_heatmaps, attention_patterns):
                try:
                    src, caption = make(item)
                except Exception as exc:  # a plot must never cost the page
                    out.append(f'<p class="note">plot unavailable: {e(type(exc).__name__)}: {e(exc)}</p>')
                    continue
                out.append(f'<figure><img alt="{e(caption)}" src="{src}"><figcaption>{e(caption)}</figcaption>'
                           "</figure>")
        out.append("</section>")
    elif verdict != "passed" and d.tests:
        out.append('<section id="plots"><h2>Where the output goes wrong</h2><p class="note">No plot data: no '
                   "failing test kept arrays to draw (they are kept for failing tests whose output has the right "
                   "shape; <code>grade run</code> keeps them with <code>--json</code>).</p></section>")
    # tests
    out.append(f'<section id="tests"><h2>Tests ({len(d.tests)})</h2><table class="tests"><thead><tr>'
               "<th>status</th><th>category</th><th>test</th><th>points</th><th>time</th></tr></thead><tbody>")
    for t in d.tests:
        out.append(_test_row(t))
    out.append("</tbody></table></section>")
    # source
    out.append('<section id="source"><h2>Submission</h2>')
    out.append(_source_block(find_source(d, report_path, source_path)))
    out.append("</section></main></body></html>")
    return "".join(out)


def _test_row(t: TestResult) -> str:
    cls = t.status if t.status in COLOUR else ""
    body = [f"<b>{e(t.id)}</b>"]
    if t.visibility == "hidden":
        body.append(' <span class="desc">(hidden)</span>')
    if t.description:
        body.append(f'<div class="desc">{e(t.description)}</div>')
    if t.message:
        body.append(f'<div class="msg">{e(t.message)}</div>')
    body.append(_diagnostics_html(t.diagnostics))
    return (f'<tr><td><span class="st {cls}">{e(MARK.get(t.status, t.status.upper()))}</span></td>'
            f'<td>{e(t.category)}</td><td>{"".join(body)}</td>'
            f'<td class="nw">{t.points:g}/{t.max_points:g}</td>'
            f'<td class="nw">{float(t.duration_s):.3f} s</td></tr>')


def _pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".src")


def write_html(path: str | os.PathLike, report: Report, **kw) -> None:
    from harness.core.report import write_atomic

    write_atomic(Path(path), render_html(report, **kw))
