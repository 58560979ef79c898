"""Prometheus metrics of this process, served at /metrics (api/metrics_route.py).

Counters and histograms are recorded where things happen (the request middleware, the GraphQL
extension, the scheduler, the executor routes); gauges of stored state (runs by status, queue
depth) are read from the database at each scrape, so every replica reports the same numbers.
One registry per process: a test that builds several apps compares differences."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

REGISTRY = CollectorRegistry()
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Request durations span a cached read (milliseconds) to a large GraphQL page (seconds).
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Phases run Terraform: seconds to an hour.
PHASE_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)

RUNS = Gauge("firstlume_runs", "Runs by status, as stored.", ["status"], registry=REGISTRY)
QUEUE_DEPTH = Gauge(
    "firstlume_queue_depth", "Runs waiting for an executor (queued or apply_queued).", registry=REGISTRY
)
PHASE_DURATION = Histogram(
    "firstlume_phase_duration_seconds",
    "From a phase's claim to its executor's finish report, by phase and reported result.",
    ["phase", "result"],
    buckets=PHASE_BUCKETS,
    registry=REGISTRY,
)
CLAIM_LATENCY = Histogram(
    "firstlume_scheduler_claim_latency_seconds",
    "How long one scheduler claim (plans and applies, in the database) took.",
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
CLAIMED = Counter(
    "firstlume_scheduler_claimed_phases_total", "Phases claimed for launch.", ["phase"], registry=REGISTRY
)
MISSED_HEARTBEATS = Counter(
    "firstlume_missed_heartbeats_total",
    "Phases failed because their executor sent no heartbeat within FIRSTLUME_HEARTBEAT_TIMEOUT.",
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "firstlume_http_request_duration_seconds",
    "HTTP requests by method, route template and status code.",
    ["method", "route", "status"],
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
GRAPHQL_DURATION = Histogram(
    "firstlume_graphql_request_duration_seconds",
    "GraphQL queries and mutations by operation type, from parsing to the result.",
    ["operation"],
    buckets=REQUEST_BUCKETS,
    registry=REGISTRY,
)
ACTIVE_SUBSCRIPTIONS = Gauge(
    "firstlume_active_subscriptions",
    "GraphQL subscriptions open now, by field.",
    ["field"],
    registry=REGISTRY,
)
NOTIFICATION_DELIVERIES = Counter(
    "firstlume_notification_deliveries_total",
    "Notifications delivered (or not), by channel and outcome (delivered, failed).",
    ["channel", "outcome"],
    registry=REGISTRY,
)

BACKGROUND_LAST_PASS = Gauge(
    "firstlume_background_last_pass_timestamp_seconds",
    "When each background service (scheduler, outbox relay, ...) last ended a pass without error.",
    ["service"],
    registry=REGISTRY,
)
BACKGROUND_FAILED_PASSES = Counter(
    "firstlume_background_failed_passes_total",
    "Passes of a background service that raised (logged, then tried again), by service.",
    ["service"],
    registry=REGISTRY,
)


@contextmanager
def active_subscription(field: str) -> Iterator[None]:
    ACTIVE_SUBSCRIPTIONS.labels(field=field).inc()
    try:
        yield
    finally:
        ACTIVE_SUBSCRIPTIONS.labels(field=field).dec()


@contextmanager
def timed(histogram: Histogram) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.observe(time.perf_counter() - started)


def render() -> bytes:
    return generate_latest(REGISTRY)
