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


def processes() -> dict[int, tuple[int, float]]:
    """{pid: (parent pid, CPU seconds of it and of its reaped children)} of every live process (/proc)."""
    tck = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tck)  # ppid; utime..cstime
    return stats
