"""The whole machine's CPU time (/proc/stat), for the benchmarks that need what no process's own figures hold: a
sandbox worker is killed, not reaped through the grader's process tree, so its CPU (the candidate's calls, its
set-up) is counted by no process the benchmark can ask."""

from __future__ import annotations

import os


def machine_cpu() -> tuple[float, float, float]:
    """CPU seconds since boot: user (with nice), system (with irq and softirq), idle (with iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    tck = os.sysconf("SC_CLK_TCK")
    return (v[0] + v[1]) / tck, (v[2] + v[5] + v[6]) / tck, (v[3] + v[4]) / tck
