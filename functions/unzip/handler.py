"""unzip: S3 ObjectCreated on uploads/*.zip -> stage every PDF entry and queue one message per file."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch import services
from pdfbatch.bootstrap import get_deps
from pdfbatch.logs import logger


@logger.inject_lambda_context(clear_state=True)
@event_source(data_class=S3Event)
def handler(event: S3Event, context: LambdaContext) -> dict[str, Any]:
    """Stage each uploaded ZIP; errors a retry can fix propagate so S3's async retry runs it again."""
    deps = get_deps(need_queue=True)
    batches = []
    for record in event.records:
        obj = record.s3.get_object
        upload = services.Upload(
            bucket=record.s3.bucket.name,
            key=unquote_plus(obj.key),  # event keys are URL-encoded
            size=obj.get("size"),
            sequencer=obj.sequencer,
            version_id=obj.version_id,
        )
        report = services.stage_zip(deps, upload)
        batches.append(
            {"batchId": report.batch_id, "status": report.status, "totalFiles": report.total_files}
        )
    return {"batches": batches}
