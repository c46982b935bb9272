"""Prometheus text exposition (format 0.0.4) without a client library: counters and one histogram, kept in
this process; gauges (queue depth, in flight) are read from the store at scrape time."""

from __future__ import annotations

import threading

BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, float("inf"))


def _labels(d: dict) -> str:
    if not d:
        return ""
    esc = lambda v: str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")  # noqa: E731
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in sorted(d.items())) + "}"


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.counters: dict[tuple[str, tuple], float] = {}
        self.hist: dict[tuple, list] = {}   # labels -> [bucket counts..., sum, count]
        self.help = {
            "grader_submissions_total": ("counter", "Submissions accepted by the API."),
            "grader_verdicts_total": ("counter", "Finished gradings by verdict (or infrastructure_error)."),
            "grader_rejections_total": ("counter", "Requests refused, by reason (rate_limit, in_flight, "
                                                   "queue_full, too_large, invalid, unauthorized, forbidden)."),
            "grader_grading_retries_total": ("counter", "Gradings retried after an infrastructure fault."),
            "grader_webhook_deliveries_total": ("counter", "Webhook delivery attempts by outcome."),
            "grader_report_renders_total": ("counter", "report.html pages rendered (not served from the cache)."),
        }

    def inc(self, name: str, amount: float = 1.0, **labels) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self.counters[key] = self.counters.get(key, 0.0) + amount

    def observe(self, seconds: float, **labels) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            h = self.hist.setdefault(key, [0] * len(BUCKETS) + [0.0, 0])
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
            h[-2] += seconds
            h[-1] += 1

    def render(self, gauges: dict[str, tuple], shared_counters: dict[str, tuple[str, float]] | None = None) -> str:
        """``gauges``: name -> (help, value) or (help, {labels-dict-as-tuple: value}); ``shared_counters``:
        counters kept in the store (every process's), name -> (help, value)."""
        out = []
        for name, (help_text, value) in gauges.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
            if isinstance(value, dict):
                out += [f"{name}{_labels(dict(labels))} {v:g}" for labels, v in sorted(value.items())]
            else:
                out.append(f"{name} {value:g}")
        for name, (help_text, value) in (shared_counters or {}).items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name} {value:g}"]
        with self._lock:
            counters = dict(self.counters)
            hist = {k: list(v) for k, v in self.hist.items()}
        for name, (kind, help_text) in self.help.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for (n, labels), v in sorted(counters.items()):
                if n == name:
                    out.append(f"{name}{_labels(dict(labels))} {v:g}")
        name = "grader_grading_seconds"
        out += [f"# HELP {name} Wall-clock seconds of one grading, by exercise, track and sandbox.",
                f"# TYPE {name} histogram"]
        for labels, h in sorted(hist.items()):
            d = dict(labels)
            for i, b in enumerate(BUCKETS):
                le = "+Inf" if b == float("inf") else f"{b:g}"
                out.append(f"{name}_bucket{_labels({**d, 'le': le})} {h[i]}")
            out.append(f"{name}_sum{_labels(d)} {h[-2]:.6f}")
            out.append(f"{name}_count{_labels(d)} {h[-1]}")
        return "\n".join(out) + "\n"
