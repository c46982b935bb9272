"""The grading service: `grade serve` (HTTP API, web pages, a pool of grading workers, a durable store).

Harness internals are reached only through :mod:`harness.service.grading` (one adapter module), so that the
reorganisation of ``harness/`` touches one file here.
"""
