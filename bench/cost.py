"""Section 6: Lambda cost per 1,000 PDFs from measured durations and the template's memory settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.stack import Report

# Public AWS Lambda prices, us-east-1, x86_64, first pricing tier (aws.amazon.com/lambda/pricing):
PRICE_PER_GB_SECOND = 0.0000166667  # USD
PRICE_PER_REQUEST = 0.20 / 1_000_000  # USD
REGION = "us-east-1 (x86_64, first tier)"


@dataclass(frozen=True)
class Cost:
    """Per 1,000 PDFs."""

    gb_seconds: float
    requests: float
    usd: float
    by_function: dict[str, tuple[float, float]]  # name -> (GB-s, requests) per 1,000 PDFs


def per_thousand(reports: dict[str, Sequence[Report]], pdfs: int) -> Cost:
    """GB-seconds (billed duration x configured memory) and invocations, scaled to 1,000 PDFs."""
    scale = 1000 / pdfs
    by_function: dict[str, tuple[float, float]] = {}
    for name, rs in reports.items():
        gbs = sum(r.billed_ms / 1000 * r.memory_mb / 1024 for r in rs) * scale
        by_function[name] = (gbs, len(rs) * scale)
    gb_seconds = sum(v[0] for v in by_function.values())
    requests = sum(v[1] for v in by_function.values())
    usd = gb_seconds * PRICE_PER_GB_SECOND + requests * PRICE_PER_REQUEST
    return Cost(gb_seconds, requests, usd, by_function)
