"""GET /metrics: the process's Prometheus metrics (firstlume/metrics.py), with the stored runs
counted by status at the scrape. Unauthenticated, like /healthz: it holds counts, no names."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from firstlume import metrics
from firstlume.api.rest.http import context_of, endpoint
from firstlume.domain.runs import RunStatus
from firstlume.services.reads.counts import runs_by_status

WAITING = (RunStatus.QUEUED, RunStatus.APPLY_QUEUED)


@endpoint
async def serve_metrics(request: Request) -> Response:
    counts = await runs_by_status(context_of(request).db)
    for status in RunStatus:
        metrics.RUNS.labels(status=status.value).set(counts.get(status.value, 0))
    metrics.QUEUE_DEPTH.set(sum(counts.get(status.value, 0) for status in WAITING))
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


routes = [Route("/metrics", serve_metrics, name="metrics", methods=["GET"])]
