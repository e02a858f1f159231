"""One Lambda execution environment, run by the local executor as `python -I -B bootstrap.py`."""

# This file plays the part of Lambda's init and of the Python runtime interface client. It runs on the
# runtime interpreter (a venv holding only boto3, like AWS's python3.13 runtime), so it imports only the
# standard library, and so the handler can import only what its own zip ships.
#
# Protocol (LocalStack's executor endpoint, see executor.py): POST .../status/{id}/ready (or /error) once
# the handler is imported; then serve POST /invoke on 127.0.0.1; for each invocation POST
# .../invocations/{request-id}/logs and then /response or /error.

from __future__ import annotations

import contextlib
import http.server
import importlib
import io
import json
import os
import queue
import sys
import threading
import time
import traceback
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

# Written to fd 1 to learn when every byte printed before it has been read back (see LogCapture.take).
_MARK = b"\x00\x1epdfbatch-log-mark\x1e\x00"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never route callbacks via a proxy

Handler = Callable[[Any, Any], Any]


class Fault(Exception):
    """An init or invoke failure with the errorType AWS's Python runtime reports for it."""

    def __init__(self, error_type: str, message: str, stack: list[str] | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.stack = stack or []

    def payload(self, request_id: str = "") -> dict[str, Any]:
        """The JSON body LocalStack (and Lambda's Invoke API) returns for this error."""
        return {
            "errorMessage": self.message,
            "errorType": self.error_type,
            "requestId": request_id,
            "stackTrace": self.stack,
        }


class LogCapture:
    """Tees fd 1 and 2 to the executor and to a per-invocation buffer."""

    # Capture happens at the file-descriptor level, not by swapping sys.stdout: logging handlers (Powertools'
    # Logger among them) keep a reference to the stream they were created with, and C code writes to fd 1.

    def __init__(self) -> None:
        self._upstream = os.dup(1)  # the pipe the executor reads: LocalStack's log
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        os.close(write_fd)
        self._read_fd = read_fd
        self._cond = threading.Condition()
        self._buffer = bytearray()
        self._marks_seen = 0
        self._marks_sent = 0
        # Lambda's runtime flushes each line; block buffering would hold prints back past the invoke's end.
        if isinstance(sys.stdout, io.TextIOWrapper):
            sys.stdout.reconfigure(line_buffering=True)
        threading.Thread(target=self._pump, name="log-pump", daemon=True).start()

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        with self._cond:
            self._buffer += data
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._upstream, view)
            except BrokenPipeError:
                os._exit(0)  # the executor is gone: nobody will ever invoke this environment again
            view = view[written:]

    def _pump(self) -> None:
        carry = b""
        while True:
            chunk = os.read(self._read_fd, 65536)
            if not chunk:
                return
            data = carry + chunk
            while (index := data.find(_MARK)) >= 0:
                self._emit(data[:index])
                data = data[index + len(_MARK) :]
                with self._cond:
                    self._marks_seen += 1
                    self._cond.notify_all()
            # Hold back a tail that could be the start of a mark split across two reads.
            longest = min(len(_MARK) - 1, len(data))
            keep = next((n for n in range(longest, 0, -1) if _MARK.startswith(data[-n:])), 0)
            self._emit(data[: len(data) - keep])
            carry = data[len(data) - keep :]

    def line(self, text: str) -> None:
        """Write one platform line (START/END/REPORT) into the log stream."""
        sys.stdout.flush()
        os.write(1, (text + "\n").encode())

    def take(self) -> str:
        """Return everything printed since the last call, once it has all come through the pipe."""
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with self._cond:
            self._marks_sent += 1
            target = self._marks_sent
        os.write(1, _MARK)
        with self._cond:
            self._cond.wait_for(lambda: self._marks_seen >= target, timeout=2.0)
            text = self._buffer.decode("utf-8", errors="replace")
            self._buffer.clear()
        return text


class LambdaContext:
    """The context object handlers receive, with the attributes AWS's Python runtime provides."""

    def __init__(self, request_id: str, invoked_function_arn: str, deadline: float) -> None:
        self.aws_request_id = request_id
        self.invoked_function_arn = invoked_function_arn
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        # A string, as on AWS (it comes straight from the environment there too).
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the executor kills this invocation."""
        return max(int((self._deadline - time.monotonic()) * 1000), 0)


def _peak_rss_mb() -> int:
    # Not getrusage(): Linux carries ru_maxrss across exec, so it would report LocalStack's own peak.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError as exc:
        # No /proc (not Linux): report 0 MB rather than a wrong figure, and say why on stderr.
        print(f"pdfbatch bootstrap: cannot read peak memory ({exc.__class__.__name__})", file=sys.stderr)
    return 0


def _post(path: str, body: dict[str, Any] | bytes) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - http URL LocalStack gave us
        f"{os.environ['LOCALSTACK_RUNTIME_ENDPOINT']}{path}",
        data=data,
        method="POST",
        headers={"Content-Type": "application/json"},  # LocalStack answers 415 without it
    )
    with _OPENER.open(request, timeout=30) as response:
        response.read()


def load_handler(spec: str) -> Handler:
    """Import `module.function` from the task root, mapping failures to AWS's init error types."""
    try:
        module_name, function_name = spec.rsplit(".", 1)
    except ValueError as exc:
        raise Fault("Runtime.MalformedHandlerName", f"Bad handler '{spec}': {exc}") from exc
    if module_name.split(".")[0] in sys.builtin_module_names:
        raise Fault(
            "Runtime.BuiltInModuleConflict", f"Cannot use built-in module {module_name} as a handler module"
        )
    try:
        module = importlib.import_module(module_name.replace("/", "."))
    except ImportError as exc:
        raise Fault("Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}") from exc
    except SyntaxError as exc:
        stack = [f'  File "{exc.filename}" Line {exc.lineno}\n    {exc.text}']
        raise Fault(
            "Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_name}': {exc}", stack
        ) from exc
    handler: Handler | None = getattr(module, function_name, None)
    if handler is None:
        # AWS reports a missing function at invoke time, not at init: mirror that.
        message = f"Handler '{function_name}' missing on module '{module_name}'"
        fault = Fault("Runtime.HandlerNotFound", message)

        def missing(event: Any, context: Any) -> Any:
            raise fault

        return missing
    return handler


def _fault_from(exc: BaseException) -> Fault:
    if isinstance(exc, Fault):
        return exc
    stack = [line for line in traceback.format_list(traceback.extract_tb(exc.__traceback__)[1:])]
    return Fault(type(exc).__name__, str(exc), stack)


def _log_error(fault: Fault) -> None:
    print(f"[ERROR] {fault.error_type}: {fault.message}", file=sys.stderr)
    if fault.stack:
        print("Traceback (most recent call last):\n" + "".join(fault.stack), end="", file=sys.stderr)


def _serve(invocations: queue.Queue[dict[str, Any]]) -> int:
    """Listen for invokes on a free loopback port; return the port."""

    class InvokeHandler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/invoke":
                self.send_response(404)
                self.end_headers()
                return
            invocations.put(json.loads(body))
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return  # the executor logs invokes; access lines would pollute the function's log

    server = http.server.HTTPServer(("127.0.0.1", 0), InvokeHandler)
    threading.Thread(target=server.serve_forever, name="invoke-server", daemon=True).start()
    return int(server.server_address[1])


def _exit_with_parent(lifeline_fd: int) -> None:
    # The executor holds the write end of our stdin pipe; EOF means it closed it or died (even by SIGKILL).
    while os.read(lifeline_fd, 1):
        continue  # bytes written to the lifeline mean nothing; only EOF does
    os._exit(0)


def _invoke(handler: Handler, logs: LogCapture, invocation: dict[str, Any], timeout: float) -> None:
    request_id = str(invocation.get("invoke-id") or uuid.uuid4())
    started = time.monotonic()
    os.environ["_X_AMZN_TRACE_ID"] = str(invocation.get("trace-id") or "")
    context = LambdaContext(request_id, str(invocation.get("invoked-function-arn") or ""), started + timeout)
    version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
    logs.line(f"START RequestId: {request_id} Version: {version}")
    outcome = "error"
    try:
        raw = invocation.get("payload")
        event = json.loads(raw) if raw else {}
        result = handler(event, context)
        try:
            body = json.dumps(result).encode()
        except (TypeError, ValueError) as exc:
            raise Fault("Runtime.MarshalError", f"Unable to marshal response: {exc}") from exc
        outcome = "response"
    except Exception as exc:  # noqa: BLE001 - every handler error is reported to the caller, as on AWS
        fault = _fault_from(exc)
        _log_error(fault)
        body = json.dumps(fault.payload(request_id)).encode()
    elapsed_ms = (time.monotonic() - started) * 1000
    max_rss_mb = _peak_rss_mb()
    logs.line(f"END RequestId: {request_id}")
    logs.line(
        f"REPORT RequestId: {request_id}\tDuration: {elapsed_ms:.2f} ms"
        f"\tBilled Duration: {int(elapsed_ms) + 1} ms\tMemory Size: {context.memory_limit_in_mb} MB"
        f"\tMax Memory Used: {max_rss_mb} MB"
    )
    _post(f"/invocations/{request_id}/logs", {"logs": logs.take()})
    _post(f"/invocations/{request_id}/{outcome}", body)


def main() -> None:
    """Import the handler, report ready (or the init error), then run invocations one at a time."""
    lifeline_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the handler must not read our lifeline
    os.close(devnull)
    threading.Thread(target=_exit_with_parent, args=(lifeline_fd,), name="lifeline", daemon=True).start()

    logs = LogCapture()
    runtime_id = os.environ["LOCALSTACK_RUNTIME_ID"]
    task_root = os.environ["LAMBDA_TASK_ROOT"]
    sys.path.insert(0, task_root)  # as on AWS: the zip's root comes first, then the runtime's boto3
    timeout = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT") or 3)
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    logs.line(f"INIT_START {started} Runtime: local python{sys.version_info[0]}.{sys.version_info[1]}")

    try:
        handler = load_handler(os.environ.get("_HANDLER", ""))
    except Exception as exc:  # noqa: BLE001 - any init failure must reach LocalStack, not kill us silently
        fault = _fault_from(exc)
        _log_error(fault)
        logs.take()
        _post(f"/status/{runtime_id}/error", fault.payload())
        sys.exit(1)  # AWS's runtime exits after an init error too

    invocations: queue.Queue[dict[str, Any]] = queue.Queue()
    port = _serve(invocations)
    _post(f"/status/{runtime_id}/ready", {"port": port})
    # Handlers run on the main thread, as on AWS (signal.alarm and friends only work there).
    while True:
        _invoke(handler, logs, invocations.get(), timeout)


if __name__ == "__main__":
    main()
