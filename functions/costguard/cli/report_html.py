"""The month report as one self-contained HTML file: inline CSS and inline SVG charts,
drawn here, on the server side. Standard library only (``html``): the report needs no
package at all, so ``costguard[report]`` adds nothing at run time.

Why SVG drawn here rather than a charting library: a library (Chart.js, Plotly, Vega)
brings 200 KB to 3.5 MB of JavaScript that would have to be inlined to stay offline, and
draws nothing without JavaScript. A burn-down is a few lines and a band; as SVG it is
about 3 KB a project, renders with JavaScript off, prints, and is searchable text.

The page has no script and a Content-Security-Policy that forbids every load (no
network, no CDN, not even an image): what it shows is in the file. Every user string
(project names, owners and resource names come from tags anyone may set) is escaped
and isolated (``<bdi>``), with control characters and lone surrogates replaced.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from costguard.domain.billed import BILLED_NOTE
from costguard.domain.models import parse_key
from costguard.domain.money import ZERO, cents, per_hour
from costguard.domain.report import Burn, Report, TeamBurn
from costguard.domain.spend import BudgetStatus

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")

#: The chart's drawing box (SVG units); it scales to the card's width.
W, H = 480, 230
LEFT, RIGHT, TOP, BOTTOM = 60, 12, 12, 30


def esc(text: object) -> str:
    """Text for HTML: escaped, quotes too, control characters and lone surrogates replaced."""
    return html.escape(_CONTROL.sub("\ufffd", str(text)), quote=True)


def user(text: object) -> str:
    """A user string: escaped, and isolated so a right-to-left override stays inside."""
    return f"<bdi>{esc(text)}</bdi>"


def usd(value: Decimal) -> str:
    """``$1,234.56``; whole dollars from $100,000 (the cents add nothing there)."""
    if abs(value) >= 100_000:
        return f"${value.quantize(Decimal(1), rounding=ROUND_HALF_UP):,}"
    return f"${cents(value):,}"


def _num(text: str) -> str:
    return f'<span class="n">{esc(text)}</span>'


def _resource(key: str) -> str:
    """A resource as a person looks it up: its id, then where (kind, region, account).
    A key that is not one (a bucket, a project) is shown whole."""
    parts = parse_key(key)
    if parts is None:
        return f"<span class=key>{esc(key)}</span>"
    where = _where(parts.kind, parts.region, parts.account)
    return f"{user(parts.id)}<br><span class=key>{where}</span>"


def _where(*pieces: str | None) -> str:
    """Kind, type, region, account, each kept on one line: on a phone "us-east-1" broke
    at its hyphens ("us-east-" / "1"); the line breaks between the pieces instead."""
    return " · ".join(f"<span class=n>{esc(x)}</span>" for x in pieces if x)


def _project(name: str | None) -> str:
    return user(name) if name is not None else '<span class="muted">unattributed</span>'


_STATUS_WORDS = {
    BudgetStatus.OVER: "heading over budget",
    BudgetStatus.WARNING: "close to budget",
    BudgetStatus.OK: "within budget",
    BudgetStatus.NO_BUDGET: "no budget set",
}


def _spent_over(b: Burn) -> bool:
    return b.budget is not None and b.month_to_date >= b.budget


def _team_spent_over(t: TeamBurn) -> bool:
    return t.budget is not None and t.month_to_date >= t.budget


def _status_words(b: Burn) -> str:
    """The badge: "over budget" once the spend has passed it, "heading over budget" while
    only the forecast has. Defect: a project that had spent $722 of $500 was "heading over
    budget"."""
    return "over budget" if _spent_over(b) else _STATUS_WORDS[b.status]


CSS = """
:root{--ink:#1d2330;--muted:#5d6678;--line:#d9dee7;--bg:#f6f7f9;--card:#fff;
--spent:#2563eb;--fc:#7c3aed;--budget:#b91c1c;--warn:#b45309;--ok:#15803d}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans",sans-serif;
color:var(--ink);background:var(--bg);overflow-wrap:break-word}
bdi,.key{overflow-wrap:anywhere}
main{max-width:1240px;margin:0 auto;padding:20px 16px 40px}
h1{font-size:1.5rem;margin:0 0 4px}h2{font-size:1.15rem;margin:28px 0 10px}
h3{font-size:1rem;margin:0;min-width:0}
p{margin:4px 0}.muted{color:var(--muted)}.n{white-space:nowrap;font-variant-numeric:tabular-nums}
.summary{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:10px;margin:16px 0}
.stat{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.stat b{display:block;font-size:1.3rem}.stat span{color:var(--muted);font-size:.85rem}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,380px),1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px;min-width:0}
.card header{display:flex;justify-content:space-between;gap:8px;align-items:baseline;flex-wrap:wrap}
.badge{font-size:.78rem;border-radius:10px;padding:1px 8px;white-space:nowrap;border:1px solid}
.over{color:var(--budget);border-color:var(--budget)}.warning{color:var(--warn);border-color:var(--warn)}
.ok{color:var(--ok);border-color:var(--ok)}.no-budget{color:var(--muted);border-color:var(--line)}
svg{display:block;width:100%;height:auto;margin:8px 0 4px}
svg text{font:16px system-ui,sans-serif;fill:var(--muted)}
.figs{display:flex;flex-wrap:wrap;gap:2px 14px;font-size:.88rem}
.note{font-size:.82rem;color:var(--muted)}
table{width:100%;border-collapse:collapse;background:var(--card);border:1px solid var(--line);
border-radius:8px;font-size:.9rem}
th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;background:#eef1f5}td.r,th.r{text-align:right}
.key{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.8rem;color:var(--muted)}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:.82rem;color:var(--muted)}
.sw{display:inline-block;width:14px;height:3px;vertical-align:middle;margin-right:4px}
footer{margin-top:28px;font-size:.82rem;color:var(--muted)}
@media (max-width:700px){
 table,thead,tbody,tr,td{display:block;width:100%}thead{display:none}
 table{border:0;background:none}
 tr{background:var(--card);border:1px solid var(--line);border-radius:8px;margin-bottom:8px;padding:4px 0}
 td{border:0;padding:3px 10px;text-align:left!important}
 td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:.8rem}
}
@media print{body{background:#fff}.card,.stat{break-inside:avoid}}
"""


# -- charts ---------------------------------------------------------------------------------


def _scale(b: Burn) -> Decimal:
    """The chart's top: four round steps above the highest of budget, spend and forecast."""
    top = max(
        b.forecast_high,
        b.month_to_date,
        (b.budget or ZERO) * Decimal("1.08"),
        Decimal(1),
    )
    return _nice(top / 4) * 4


def _nice(value: Decimal) -> Decimal:
    """The next round step (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^n) at or above ``value``."""
    base = Decimal(10) ** (value.adjusted())
    for step in (1, Decimal("1.5"), 2, Decimal("2.5"), 3, 4, 5, 6, 8, 10):
        if value <= base * step:
            return base * step
    return base * 10


def _xy(b: Burn, top: Decimal, day: float, amount: Decimal) -> tuple[float, float]:
    x = LEFT + (W - LEFT - RIGHT) * day / b.days_in_month
    y = TOP + (H - TOP - BOTTOM) * (1 - float(amount / top))
    return round(x, 1), round(y, 1)


def _short(value: Decimal) -> str:
    """An axis label: ``$12.5k``, ``$2M``, ``$0.25``; never rounded to another tick."""
    for size, suffix in ((Decimal(1_000_000), "M"), (Decimal(1000), "k"), (Decimal(1), "")):
        if value >= size or size == 1:
            shown = (value / size).normalize()
            text = f"{shown:f}"
            return f"${text}{suffix}"
    return f"${value}"


def chart(b: Burn, thresholds: Sequence[int]) -> str:
    """The burn-down: spent by day, the forecast to month end with its range, the budget
    line and its thresholds, each crossing marked. Every part has a ``data-role``."""
    top = _scale(b)
    parts: list[str] = []
    x0, x1 = LEFT, W - RIGHT
    for i in range(5):
        amount = top * i / 4
        _, y = _xy(b, top, 0, amount)
        parts.append(
            f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#e8ebf0"/>'
            f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end">{_short(amount)}</text>'
        )
    for day in sorted({1, 8, 15, 22, b.days_in_month}):
        x, _ = _xy(b, top, day - 0.5, ZERO)
        parts.append(f'<text x="{x}" y="{H - 8}" text-anchor="middle">{day}</text>')
    if b.elapsed < b.days_in_month:
        x, _ = _xy(b, top, b.elapsed, ZERO)
        parts.append(
            f'<line data-role="now" x1="{x}" y1="{TOP}" x2="{x}" y2="{H - BOTTOM}" '
            'stroke="#9aa3b2" stroke-dasharray="2 3"/>'
        )
    if b.budget is not None and b.budget > 0:
        for pct in thresholds:
            if pct >= 100:
                continue
            _, y = _xy(b, top, 0, b.budget * pct / 100)
            parts.append(
                f'<line data-role="threshold" data-pct="{pct}" x1="{x0}" y1="{y}" x2="{x1}" '
                f'y2="{y}" stroke="var(--warn)" stroke-width="1" stroke-dasharray="1 4"/>'
            )
        _, y = _xy(b, top, 0, b.budget)
        parts.append(
            f'<line data-role="budget" x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" '
            'stroke="var(--budget)" stroke-width="2" stroke-dasharray="7 4"/>'
            f'<text x="{x0 + 4}" y="{y - 5}" fill="var(--budget)" style="fill:var(--budget)">'
            "budget</text>"
        )
    else:
        parts.append(
            f'<text data-role="no-budget" x="{x0 + 4}" y="{TOP + 14}">no budget set</text>'
        )
    if len(b.series) > 1:
        points = [_xy(b, top, p.day, p.usd) for p in b.series]
        line = " ".join(f"{x},{y}" for x, y in points)
        _, base = _xy(b, top, 0, ZERO)
        area = f"{points[0][0]},{base} {line} {points[-1][0]},{base}"
        parts.append(
            f'<polygon points="{area}" fill="var(--spent)" fill-opacity=".1"/>'
            f'<polyline data-role="spent" points="{line}" fill="none" stroke="var(--spent)" '
            'stroke-width="2.5" stroke-linejoin="round"/>'
        )
        start = points[-1]
    else:
        # Month-to-date only (no line through days the ledger did not keep), or the month's
        # first instant: one point, at today.
        start = _xy(b, top, b.elapsed, b.month_to_date)
        parts.append(
            f'<circle data-role="spent" cx="{start[0]}" cy="{start[1]}" r="4" fill="var(--spent)"/>'
        )
    if b.elapsed < b.days_in_month:
        end = _xy(b, top, b.days_in_month, b.forecast)
        low = _xy(b, top, b.days_in_month, b.forecast_low)
        high = _xy(b, top, b.days_in_month, b.forecast_high)
        parts.append(
            f'<polygon data-role="forecast-range" points="{start[0]},{start[1]} {high[0]},'
            f'{high[1]} {low[0]},{low[1]}" fill="var(--fc)" fill-opacity=".13"/>'
            f'<line data-role="forecast" x1="{start[0]}" y1="{start[1]}" x2="{end[0]}" '
            f'y2="{end[1]}" stroke="var(--fc)" stroke-width="2" stroke-dasharray="5 4"/>'
        )
    else:
        parts.append('<g data-role="forecast" data-closed="true"></g>')
    for c in b.crossings:
        if c.day is None:
            continue
        x, y = _xy(b, top, c.day, c.usd)
        fill = "#fff" if c.projected else "var(--warn)"
        parts.append(
            f'<circle data-role="crossing" data-pct="{c.pct}" data-projected='
            f'"{str(c.projected).lower()}" cx="{x}" cy="{y}" r="4.5" fill="{fill}" '
            'stroke="var(--warn)" stroke-width="2"/>'
        )
    title = (
        f"{b.project or 'unattributed'}: {usd(b.month_to_date)} spent, forecast "
        f"{usd(b.forecast)}" + (f" against a {usd(b.budget)} budget" if b.budget else "")
    )
    return (
        f'<svg data-role="chart" viewBox="0 0 {W} {H}" role="img" '
        f'preserveAspectRatio="xMidYMid meet"><title>{esc(title)}</title>'
        + "".join(parts)
        + "</svg>"
    )


def _range(b: Burn) -> str:
    """The forecast's range; one figure when the rate has held steady."""
    low, high = usd(b.forecast_low), usd(b.forecast_high)
    return _num(low) if low == high else f"{_num(low)} to {_num(high)}"


def _crossing_text(b: Burn) -> str:
    words = []
    for c in b.crossings:
        if c.day is None:
            words.append(f"{c.pct}% reached")
        elif c.projected:
            words.append(f"{c.pct}% around day {int(c.day) + 1}")
        else:
            words.append(f"{c.pct}% on day {min(int(c.day) + 1, b.days_in_month)}")
    return "; ".join(words)


def card(b: Burn, thresholds: Sequence[int]) -> str:
    status = b.status.value
    split = b.by_category_cents
    figs = [
        f"<span>spent {_num(usd(b.month_to_date))}</span>",
        f'<span data-role="by-category">compute {_num(usd(split["compute"]))}, '
        f"storage {_num(usd(split['storage']))}"
        + (f", not split {_num(usd(split['not_split']))}" if split["not_split"] else "")
        + "</span>",
        f"<span>budget {_num(usd(b.budget)) if b.budget is not None else 'none'}</span>",
    ]
    if b.elapsed < b.days_in_month:
        figs.append(f"<span>forecast {_num(usd(b.forecast))}</span>")
        if b.range_basis:
            figs.append(f"<span>range {_range(b)}</span>")
        figs.append(f"<span>run-rate {_num(per_hour(b.run_rate))}</span>")
    notes = []
    crossing = _crossing_text(b)
    if crossing:
        notes.append(f"Thresholds: {esc(crossing)}.")
    if b.elapsed < b.days_in_month and not b.range_basis:
        notes.append("No run-rate history yet: the range is the forecast.")
    if not b.has_days:
        notes.append("Month-to-date only: the ledger kept no days for this month.")
    elif b.undated_usd > 0:
        notes.append(
            f"{_num(usd(b.undated_usd))} was recorded before the ledger kept days; "
            "it is drawn at the month's start."
        )
    if split["not_split"]:
        notes.append(
            f"{_num(usd(split['not_split']))} was accrued before the ledger split months by "
            "category: it is shown as not split, neither compute nor storage."
        )
    if b.unpriced:
        noun = "resource has" if b.unpriced == 1 else "resources have"
        notes.append(f"{b.unpriced} {noun} no price: not in these figures.")
    if b.owners:
        notes.append("Owners: " + ", ".join(user(o) for o in b.owners[:3]) + ".")
    return (
        f'<article class="card" data-project="{esc(b.project or "")}">'
        f"<header><h3>{_project(b.project)}</h3>"
        f'<span class="badge {status}">{_status_words(b)}</span></header>'
        + chart(b, thresholds)
        + f'<div class="figs">{"".join(figs)}</div>'
        + "".join(f'<p class="note">{n}</p>' for n in notes)
        + "</article>"
    )


# -- tables ---------------------------------------------------------------------------------


def _per_1000(value: Decimal | None, status: str) -> str:
    """$ per 1,000 predictions, or why there is none (never $0 for no traffic)."""
    if value is None:
        return f'<span class="muted">{esc(status)}</span>'
    return _num(f"${value.quantize(Decimal('0.0001'), rounding=ROUND_HALF_UP)}")


def _predictions_html(r: Report) -> str:
    """Each endpoint variant's $ per 1,000 predictions over the last 24 hours, then each
    UTC day's (the day's cost over its invocations)."""
    days = sorted({d.day for c in r.prediction_costs for d in c.days})
    # Several accounts (an Organization's roll-up): each row says whose, and where.
    several = len({c.account for c in r.prediction_costs}) > 1
    headers = [
        *((("Account", False),) if several else ()),
        ("Endpoint variant", False),
        ("Run-rate", True),
        ("Invocations/h", True),
        ("$/1,000 (24 h)", True),
        *((day.strftime("%b %d"), True) for day in days),
    ]
    rows = []
    for c in r.prediction_costs:
        by_day = {d.day: d for d in c.days}
        where = (f"{c.count} x " if c.count > 1 else "") + (c.instance_type or "")
        rows.append(
            [
                *(
                    (f"{esc(c.account)}<br><span class=key>{esc(c.region)}</span>",)
                    if several
                    else ()
                ),
                f"{user(c.endpoint + '/' + c.variant)}<br><span class=key>{_where(where)}</span>",
                _num(per_hour(c.usd_per_hour)) if c.usd_per_hour is not None else "no price",
                _num(f"{c.invocations_per_hour:,.0f}")
                if c.invocations_per_hour is not None
                else '<span class="muted">unknown</span>',
                _per_1000(c.usd_per_1000, c.status.value),
                *(
                    _per_1000(by_day[day].usd_per_1000, by_day[day].status.value)
                    if day in by_day
                    else ""
                    for day in days
                ),
            ]
        )
    return "<h2>Cost per 1,000 predictions</h2>" + table(headers, rows, "No endpoints.")


def table(headers: Sequence[tuple[str, bool]], rows: Iterable[Sequence[str]], empty: str) -> str:
    """A table whose cells are already HTML; ``(header, right-aligned)``. On a narrow
    screen each row becomes a block of labelled lines (no sideways scrolling)."""
    body = []
    for row in rows:
        cells = "".join(
            f'<td data-label="{esc(h)}"{" class=r" if right else ""}>{cell}</td>'
            for (h, right), cell in zip(headers, row, strict=True)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f"<th{' class=r' if right else ''}>{esc(h)}</th>" for h, right in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _month_rate(value: Decimal | None) -> str:
    return _num(usd(value * 730)) if value is not None else "no price"


def _whose(scope: str) -> str:
    """Whose month it is: an account id, a scope someone chose, or a local scan's. Defect:
    a local scan's page was headed "Account default", the settings' placeholder."""
    from costguard.config_spec import EnvOnly

    if re.fullmatch(r"[0-9]{12}", scope):
        return f"Account {user(scope)}"
    if scope == EnvOnly.model_fields["scope"].default:
        return "A local scan of this account"
    return f"Scope {user(scope)}"


def render(report: Report) -> str:
    """The whole page."""
    r = report
    burns = [*r.burns, *([r.unattributed] if r.unattributed else [])]
    saved = r.actions.saved_usd_per_month
    narrowed = f" ({esc(', '.join(r.narrowed))})" if r.narrowed else ""
    stats = [
        ("spent this month" if r.live else "spent in the month", usd(r.month_to_date)),
        ("forecast to month end", usd(r.forecast)),
        ("budgets", usd(r.budget) if r.budget else "none set"),
        ("saved by actions, a month", usd(saved)),
    ]
    if not r.live:
        del stats[1]  # a closed month's forecast is what it spent
    over = sum(1 for b in r.burns if b.status is BudgetStatus.OVER)
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">",
        f"<title>CostGuard report {esc(r.month)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>Cloud spend, {esc(_month_name(r.month))}{narrowed}</h1>",
        # A date never breaks at its hyphens ("2026-11-" / "29" on a phone).
        f'<p class="muted">{_whose(r.scope)} · generated <span class=n>{esc(_when(r))}</span>'
        f" · prices as of <span class=n>{esc(r.catalog_as_of)}</span>"
        + (_age_words(r.catalog_age_days) if r.catalog_age_days is not None else "")
        + "</p>",
        '<section class="summary">'
        + "".join(
            f'<div class="stat"><b class="n">{esc(v)}</b><span>{k}</span></div>' for k, v in stats
        )
        + "</section>",
    ]
    if over:
        spent = sum(1 for b in r.burns if b.status is BudgetStatus.OVER and _spent_over(b))
        said = [
            f"{n} project{'s are' if n > 1 else ' is'} {words}"
            for n, words in ((spent, "over budget"), (over - spent, "heading over budget"))
            if n
        ]
        out.append(f"<p><strong>{'; '.join(said)}.</strong></p>")
    # Each team said as it is: "over budget" once its spend has passed the budget,
    # "heading over budget" while only the forecast has (as the projects' line above).
    over_teams = [t for t in r.teams if t.status is BudgetStatus.OVER]
    team_lines = []
    for words, teams in (
        ("over budget", [t.team for t in over_teams if _team_spent_over(t)]),
        ("heading over budget", [t.team for t in over_teams if not _team_spent_over(t)]),
    ):
        if teams:
            many = len(teams) > 1
            named = ", ".join(user(t) for t in teams)
            team_lines.append(
                f"Team{'s' if many else ''} {named} {'are' if many else 'is'} {words}"
            )
    if team_lines:
        out.append(f"<p><strong>{'; '.join(team_lines)}.</strong></p>")
    out.append(_blind_html(r))
    out.append(
        (
            "<h2>Projects: the month so far and where it is heading</h2>"
            if r.live
            else "<h2>Projects: the month by day</h2>"
        )
        + '<div class="legend"><span><i class="sw" style="background:var(--spent)"></i>spent</span>'
        '<span><i class="sw" style="background:var(--fc)"></i>forecast and its range</span>'
        '<span><i class="sw" style="background:var(--budget)"></i>budget</span>'
        '<span><i class="sw" style="background:var(--warn)"></i>'
        f"thresholds {esc(', '.join(f'{t}%' for t in r.thresholds))}; a dot where crossed "
        "(hollow: on the forecast)</span></div>"
    )
    if burns:
        out.append('<div class="grid">' + "".join(card(b, r.thresholds) for b in burns) + "</div>")
    else:
        out.append('<p class="muted">No spend recorded for this month yet.</p>')
    out.append("<h2>Spend by project</h2>")
    # The team column only where the deployment has teams.
    team_header = [("Team", False)] if r.teams else []
    split_keys = _split_keys(r)
    split_header = [(k.replace("_", " ").capitalize(), True) for k in split_keys]
    out.append(
        table(
            [
                ("Project", False),
                *team_header,
                ("Spent", True),
                *split_header,
                ("Budget", True),
                ("Forecast", True),
                ("Range", True),
                ("Run-rate", True),
            ],
            (
                [
                    _project(b.project),
                    *([_team(r.team_of.get(b.project or ""))] if r.teams else []),
                    _num(usd(b.month_to_date)),
                    *(_num(usd(b.by_category_cents[k])) for k in split_keys),
                    _num(usd(b.budget)) if b.budget is not None else "none",
                    _num(usd(b.forecast)),
                    _range(b),
                    _num(per_hour(b.run_rate)),
                ]
                for b in burns
            ),
            "No projects.",
        )
    )
    if r.teams:
        out.append(_teams_html(r))
    out.append(_billed_html(r))
    if r.live:
        out.append("<h2>Spend by kind (current run-rate)</h2>")
        out.append(
            table(
                [("Kind", False), ("Resources", True), ("Run-rate", True), ("A month", True)],
                (
                    [
                        esc(k.kind.value),
                        _num(str(k.resources))
                        + (
                            f' <span class="muted">({k.unpriced} unpriced)</span>'
                            if k.unpriced
                            else ""
                        ),
                        _num(per_hour(k.usd_per_hour)),
                        _num(usd(k.usd_per_hour * 730)),
                    ]
                    for k in r.kinds
                ),
                "No running resources.",
            )
        )
        out.append("<h2>Top resources</h2>")
        out.append(
            table(
                [
                    ("Resource", False),
                    ("Kind", False),
                    ("Project", False),
                    ("Owner", False),
                    ("Run-rate", True),
                    ("A month", True),
                ],
                (
                    [
                        f"{user(t.name)}<br><span class=key>"
                        + _where(t.instance_type, t.region)
                        + "</span>",
                        esc(t.kind.value),
                        _project(t.project),
                        user(t.owner) if t.owner else '<span class="muted">none</span>',
                        _num(per_hour(t.usd_per_hour))
                        if t.usd_per_hour is not None
                        else "no price",
                        _month_rate(t.usd_per_hour),
                    ]
                    for t in r.top
                ),
                "No running resources.",
            )
        )
    if r.live and r.prediction_costs:
        out.append(_predictions_html(r))
    out.append(_actions_html(r))
    if r.live:
        total = sum((a[2] for a in r.advice), ZERO)
        out.append(
            f"<h2>Advice: {_num(usd(total))} a month to save</h2>"
            if r.advice
            else "<h2>Advice</h2>"
        )
        out.append(
            table(
                [("Resource", False), ("Advice", False), ("Saves a month", True)],
                (
                    [_resource(res), esc(why), _num(usd(saving))]
                    for _code, res, saving, why in r.advice
                ),
                "No advice: nothing cheaper found.",
            )
        )
        out.append("<h2>Findings</h2>")
        out.append(
            table(
                [("Finding", False), ("Severity", False), ("Count", True), ("Examples", False)],
                (
                    [
                        esc(g.code.replace("-", " ")),
                        esc(g.severity),
                        _num(str(g.count)),
                        "<br>".join(
                            f"<span class=key>{esc(_short_key(f.resource))}</span> {esc(f.message)}"
                            for f in g.examples
                        ),
                    ]
                    for g in r.findings
                ),
                "No findings.",
            )
        )
    out.append(
        "<footer>Forecast: spent so far plus the current run-rate for the hours left. Range: "
        "the same at the lowest and highest hourly rate of the last three days (the scans' "
        "run-rates, and each of the last seven whole days' spend). Unpriced resources are "
        "left out of every figure, never counted as $0. This file works offline: it loads "
        "nothing.</footer></main></body></html>"
    )
    return "\n".join(out)


def _team(name: str | None) -> str:
    return user(name) if name else '<span class="muted">none</span>'


def _split_keys(r: Report) -> tuple[str, ...]:
    """The month-to-date's parts the tables show: compute and storage, and not split only
    where a month holds spend an older version accrued before the ledger split it."""
    return ("compute", "storage", *(("not_split",) if r.blind.not_split else ()))


def _teams_html(r: Report) -> str:
    """Each team: the sum of its projects' rows above, against its own budget."""
    split_keys = _split_keys(r)
    return "<h2>Spend by team (each the sum of its projects)</h2>" + table(
        [
            ("Team", False),
            ("Projects", False),
            ("Spent", True),
            *((k.replace("_", " ").capitalize(), True) for k in split_keys),
            ("Budget", True),
            ("Forecast", True),
            ("Run-rate", True),
            ("Status", False),
        ],
        (
            [
                user(t.team),
                ", ".join(user(p) for p in t.projects) or '<span class="muted">none yet</span>',
                _num(usd(t.month_to_date)),
                *(_num(usd(t.by_category.get(k, ZERO))) for k in split_keys),
                _num(usd(t.budget)) if t.budget is not None else "none",
                _num(usd(t.forecast)),
                _num(per_hour(t.run_rate)),
                esc(
                    "over budget"
                    if t.budget is not None and t.month_to_date >= t.budget
                    else _STATUS_WORDS[t.status]
                ),
            ]
            for t in r.teams
        ),
        "No teams.",
    )


def _actions_html(r: Report) -> str:
    a = r.actions
    rows = [
        [
            esc(x.action.replace("-", " ")),
            _resource(x.resource),
            _project(x.project),
            esc(label),
            _num(when),
            _num(usd(x.usd_per_month)),
        ]
        for label, items in (("done", a.taken), ("warned", a.pending), ("dry-run", a.would))
        for x in items
        for when in [
            f"by {_stamp(x.deadline)}" if label == "warned" and x.deadline else _time(x.at)
        ]
    ]
    head = (
        f"<h2>Actions: {_num(usd(a.saved_usd_per_month))} a month saved"
        + (
            f", {_num(usd(a.would_save_usd_per_month))} more in dry-run"
            if a.would_save_usd_per_month
            else ""
        )
        + "</h2>"
    )
    return head + table(
        [
            ("Action", False),
            ("Resource", False),
            ("Project", False),
            ("Status", False),
            ("When", False),
            ("Saves a month", True),
        ],
        rows,
        "No actions this month.",
    )


def _time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%d %b %H:%M UTC")


def _stamp(text: str) -> str:
    """A deadline tag (ISO 8601) as :func:`_time` shows times; as given if it is not one."""
    try:
        return _time(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return text


def _short_key(key: str) -> str:
    """A finding's subject without the account (the page is about one account)."""
    parts = parse_key(key)
    return key if parts is None else f"{parts.region}/{parts.kind}/{parts.id}"


def _billed_html(r: Report) -> str:
    """What AWS billed each project beside what the scan saw (Cost Explorer), when read."""
    if r.billed is None or not r.billed.rows:
        return ""
    rows = (
        [
            _project(b.project),
            _num(usd(b.seen)),
            _num(usd(b.billed)),
            _num(("+" if b.difference >= 0 else "−") + usd(abs(b.difference))),
            _num(usd(b.data_transfer)),
            _num(usd(b.other)),
        ]
        for b in r.billed.rows
    )
    return (
        '<section data-role="billed"><h2>Billed by AWS beside what the scan saw</h2>'
        f'<p class="muted">{esc(BILLED_NOTE)} Read {esc(_stamp(r.billed.as_of))}.</p>'
        + table(
            [
                ("Project", False),
                ("Seen by the scan", True),
                ("Billed", True),
                ("Difference", True),
                ("Data transfer", True),
                ("Other, not seen", True),
            ],
            rows,
            "Nothing billed.",
        )
        + "</section>"
    )


def _blind_html(r: Report) -> str:
    b = r.blind
    lines = []
    if b.unreadable:
        lines.append(
            "Could not read "
            + ", ".join(esc(x) for x in b.unreadable)
            + ": their spend is missing, not zero."
        )
    if b.unpriced_types:
        lines.append(
            "No price for "
            + ", ".join(f"{esc(t)} ({n})" for t, n in b.unpriced_types.items())
            + ": left out of every figure."
        )
    if b.month_to_date_only:
        lines.append(
            "Month-to-date only (no daily history recorded) for "
            + ", ".join(user(p) for p in b.month_to_date_only[:10])
            + (
                f" and {len(b.month_to_date_only) - 10} more"
                if len(b.month_to_date_only) > 10
                else ""
            )
            + "."
        )
    if b.not_split:
        lines.append(
            "Not split into compute and storage (accrued before the ledger split months by "
            "category) for "
            + ", ".join(user(p) for p in b.not_split[:10])
            + (f" and {len(b.not_split) - 10} more" if len(b.not_split) > 10 else "")
            + "."
        )
    if not r.live:
        lines.append(
            "This month is closed: resources, advice and findings are shown for the current "
            "month only, and budgets are those tagged today."
        )
    if not lines:
        return ""
    return (
        '<section class="card" data-role="blind-spots"><h3>What this report could not see</h3>'
        + "".join(f"<p>{line}</p>" for line in lines)
        + "</section>"
    )


def _age_words(days: int) -> str:
    """The catalog's age; nothing when it is dated after the report (a replayed month)."""
    if days < 0:
        return ""
    return " (today)" if days == 0 else f" ({days} day{'s' if days != 1 else ''} old)"


def _month_name(month: str) -> str:
    import calendar

    year, mon = month.split("-")
    return f"{calendar.month_name[int(mon)]} {year}"


def _when(r: Report) -> str:
    return r.generated_at.strftime("%Y-%m-%d %H:%M UTC")
