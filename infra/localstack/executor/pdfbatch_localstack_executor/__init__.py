"""LocalStack plugin: run Lambda functions as local subprocesses instead of Docker containers."""

from __future__ import annotations

import os
from typing import Any

from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class LocalRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    """Selected with LAMBDA_RUNTIME_EXECUTOR=local."""

    name = "local"

    def load(self, *args: Any, **kwargs: Any) -> Any:
        """Return the executor class; patch SQS mappings for MaximumConcurrency and Twisted's form parse."""
        # Imported here so that merely listing plugins stays cheap. LocalStack loads the executor when the
        # Lambda provider starts (validate_environment), before any event source mapping can exist.
        from pdfbatch_localstack_executor import form_parsing, sqs_concurrency
        from pdfbatch_localstack_executor.executor import LocalRuntimeExecutor

        sqs_concurrency.apply()
        if not os.environ.get("PDFBATCH_LOCALSTACK_UNTRIMMED"):  # the bench's "as it comes" side
            form_parsing.apply()
        return LocalRuntimeExecutor
