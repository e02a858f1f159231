"""pdfbatch's use cases, one module each, over the ports (docs/ARCHITECTURE.md: which rule lives where).

- ``tally``       counted once, completes once, the ledger wins (every other module leans on it)
- ``batches``     batch ids, upload tokens, creating a batch, ending one that never got its ZIP
- ``staging``     unzip: inspect the ZIP, stage each PDF, queue one message per file
- ``processing``  process_pdf: one staged PDF to one outcome; giving up on the last receive
- ``redelivery``  backoff (files jittered, callbacks not), making a message visible now, OutOfTime
- ``views``       the status API's reads (batch status, files, find by key)
- ``settle``      on a schedule, what a read would settle for batches nobody reads
- ``operations``  the operator's retry, dead letters and redrive
- ``report``      ``pdfbatch report`` and the one percentile definition
- ``orphans``     ``pdfbatch gc``: final objects nothing points at, found by checking references
- ``callback_delivery`` a batch's signed callback: delivery attempts, lanes, the record of each
- ``invocation``  process_pdf's read-ahead: an invocation's S3 waits overlapped
- ``file_messages`` the per-record path both file functions share (budget, metrics, failure path)

``Deps`` (``deps``) is what they all run on. Import each use case by its module
(``from pdfbatch.services import staging``, ``from pdfbatch.services.deps import Deps``): this package
re-exports nothing, so a function pays in its cold start only for the modules it names.
"""
