"""A LocalStack RuntimeExecutor that runs each Lambda execution environment as a local subprocess."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from localstack import config
from localstack.aws.api.lambda_ import PackageType
from localstack.http import Response
from localstack.services.lambda_.invocation.executor_endpoint import (
    ExecutorEndpoint,
    InvokeSendError,
    StatusErrorException,
)
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import LambdaRuntimeException, RuntimeExecutor
from werkzeug import Request

LOG = logging.getLogger(__name__)
# Handler output goes to LocalStack's log under its own logger, so it can be filtered or silenced.
FUNCTION_LOG = logging.getLogger("pdfbatch_localstack_executor.function")

# The interpreter that runs handlers: a venv with only boto3, like AWS's python3.13 runtime.
PYTHON_ENV = "PDFBATCH_LAMBDA_PYTHON"
# Exported by tools.localstack and passed on to every function process, so `down` can find leftovers.
HOME_ENV = "PDFBATCH_LOCALSTACK_HOME"
BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
LOOPBACK = "127.0.0.1"
STOP_GRACE_SECONDS = 1.0
# On AWS every execution environment has CPU of its own. Here LocalStack, a batch's workers and the API
# share the machine's cores, and a status poll waited behind a batch's file work (bench section 5). So
# the environments of background functions (all but those of the services named interactive, by their
# POWERTOOLS_SERVICE_NAME) run at this niceness: a poll, and LocalStack serving it, go first.
NICE_ENV = "PDFBATCH_BACKGROUND_NICE"  # 0 (or unset): every environment at LocalStack's own priority
INTERACTIVE_ENV = "PDFBATCH_INTERACTIVE_SERVICES"  # comma-separated; default: the status API's


def runtime_python() -> str | None:
    """The configured runtime interpreter, or None when it is missing."""
    path = os.environ.get(PYTHON_ENV, "")
    return path if path and os.access(path, os.X_OK) else None


def niceness_for(function_env: dict[str, str]) -> int:
    """The niceness an environment runs at: NICE_ENV for background work, 0 for interactive services."""
    interactive = os.environ.get(INTERACTIVE_ENV, "pdfbatch-status").split(",")
    if function_env.get("POWERTOOLS_SERVICE_NAME") in interactive:
        return 0
    try:
        return max(0, min(19, int(os.environ.get(NICE_ENV, "0"))))
    except ValueError:
        return 0


def _error_payload(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def _exit_description(returncode: int) -> str:
    # Worded like Lambda's own Runtime.ExitError messages.
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name.removeprefix("SIG").lower()
        except ValueError:
            name = str(-returncode)
        return f"signal: {name}"
    return f"exit status {returncode}"


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class _PortReportingEndpoint(ExecutorEndpoint):
    """LocalStack's executor endpoint, also learning the child's invoke port from its ready call."""

    # The child binds port 0 and says which port it got: no race over a port picked in advance.
    def status_ready(self, request: Request, executor_id: str) -> Response:
        """Record the child's port, then resolve the startup future as LocalStack does."""
        body = request.get_json(silent=True)
        if isinstance(body, dict) and isinstance(body.get("port"), int):
            self.container_port = body["port"]
        return super().status_ready(request, executor_id)


class LocalRuntimeExecutor(RuntimeExecutor):
    """Runs `python -I -B bootstrap.py` in the function's unzipped code folder."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.executor_endpoint = _PortReportingEndpoint(self.id, container_address=LOOPBACK)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}
        self._stopped = False
        self._tail: deque[str] = deque(maxlen=1000)  # for get_logs(), shown by LocalStack on init failures
        self._invoke_lines: list[str] | None = None  # what the current invocation printed, seen from here
        self._request_id = ""
        self._tmpdir = Path(config.dirs.tmp) / "lambda-env" / self.id

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self, env_vars: dict[str, str]) -> None:
        """Spawn the environment and wait until its handler is imported."""
        self.executor_endpoint.start()
        self._env = self._child_env(env_vars)
        self._spawn()
        self.executor_endpoint.wait_for_startup()

    def stop(self) -> None:
        """Kill the environment's process group and release the endpoint."""
        with self._lock:
            self._stopped = True
            process, self._process = self._process, None
        if process is not None:
            self._terminate(process, grace=STOP_GRACE_SECONDS)
        try:
            self.executor_endpoint.shutdown()
        except Exception as exc:  # noqa: BLE001 - shutdown of a half-started endpoint may fail; nothing to do
            LOG.debug("Error while shutting down executor endpoint %s: %s", self.id, exc)
        shutil.rmtree(self._tmpdir, ignore_errors=True)

    def _child_env(self, env_vars: dict[str, Any]) -> dict[str, str]:
        # A clean environment, as on AWS: nothing of LocalStack's own settings leaks into the function.
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "TMPDIR": str(self._tmpdir),  # each environment gets its own /tmp, as on AWS
        }
        if home := os.environ.get(HOME_ENV):
            env[HOME_ENV] = home
        env.update({key: str(value) for key, value in env_vars.items()})
        code = self.function_version.config.code
        if code is None:
            raise LambdaRuntimeException("Local executor runs zip-packaged functions only: no code")
        # LocalStack sets the container's paths (/var/task); here the code runs where it was unzipped.
        env["LAMBDA_TASK_ROOT"] = str(code.get_unzipped_code_location())
        return env

    def _spawn(self) -> None:
        python = runtime_python()
        if python is None:
            raise LambdaRuntimeException(f"{PYTHON_ENV} does not name an executable runtime interpreter")
        self._tmpdir.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(  # noqa: S603 - fixed argv: the runtime interpreter and our bootstrap
            [python, "-I", "-B", str(BOOTSTRAP)],
            cwd=self._env["LAMBDA_TASK_ROOT"],
            env=self._env,
            stdin=subprocess.PIPE,  # the child's lifeline: EOF tells it we are gone
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout kills whatever it spawned too
            close_fds=True,
        )
        if nice := niceness_for(self._env):
            try:  # before its first invocation: what it spawns later (the PDF reader) inherits it
                os.setpriority(os.PRIO_PROCESS, process.pid, nice)
            except OSError as exc:
                LOG.debug("Could not lower the priority of %s: %s", self.id, exc)
        with self._lock:
            self._process = process
        name = self.id[:8]
        pump = threading.Thread(target=self._pump, args=(process,), name=f"lambda-out-{name}", daemon=True)
        pump.start()
        threading.Thread(
            target=self._watch, args=(process, pump), name=f"lambda-watch-{name}", daemon=True
        ).start()

    def _pump(self, process: subprocess.Popen[bytes]) -> None:
        """Forward the child's output to LocalStack's log and keep it for get_logs()."""
        assert process.stdout is not None
        prefix = f"[{self.function_version.id.function_name} {self.id[:8]}]"
        for raw in iter(process.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            self._tail.append(line)
            if self._invoke_lines is not None:
                self._invoke_lines.append(line)
            FUNCTION_LOG.info("%s %s", prefix, line)

    def _watch(self, process: subprocess.Popen[bytes], pump: threading.Thread) -> None:
        """Turn an unexpected exit of the child into an error for whoever is waiting on it."""
        returncode = process.wait()
        pump.join(timeout=1.0)  # let the last lines in, unless a grandchild still holds the pipe
        with self._lock:
            if self._stopped or process is not self._process:
                return  # we killed it on purpose (stop or timeout)
            self._process = None
        reason = _exit_description(returncode)
        LOG.info("Lambda environment %s exited (%s)", self.id, reason)
        startup = self.executor_endpoint.startup_future
        if startup is not None and not startup.done():
            payload = _error_payload("Runtime.ExitError", f"Error: Runtime exited with error: {reason}")
            self._settle(startup, error=StatusErrorException("Runtime exited during init", payload=payload))
        invocation = self.executor_endpoint.invocation_future
        if invocation is not None and not invocation.done():
            message = f"RequestId: {self._request_id} Error: Runtime exited with error: {reason}"
            self._settle(invocation, self._result(_error_payload("Runtime.ExitError", message), extra=[]))

    @staticmethod
    def _settle(future: Future[Any], result: Any = None, error: BaseException | None = None) -> None:
        # The child may answer at the same moment; whoever comes second is ignored.
        try:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
        except InvalidStateError:
            LOG.debug("future already settled by the child's own answer; late result dropped")

    def _terminate(self, process: subprocess.Popen[bytes], grace: float = 0.0) -> None:
        """Signal the child's whole process group: SIGTERM first when given a grace period, then SIGKILL."""
        steps = ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)) if grace else ((signal.SIGKILL, 5.0),)
        for sig, wait in steps:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group may outlive its leader (a handler's own subprocesses): make sure it is gone.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError) as exc:
            LOG.debug("process group %s already gone (%s)", process.pid, type(exc).__name__)
        if process.stdin is not None:
            process.stdin.close()

    # --- invocations -----------------------------------------------------------------------------------

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        """Send one invocation and wait for it, enforcing the function's timeout."""
        with self._lock:
            alive = self._process is not None and self._process.poll() is None
        if not alive:
            # The last invocation timed out or crashed the process: Lambda re-initialises the environment.
            self._restart()
        timeout = float(self.function_version.config.timeout)
        self._request_id = str(payload.get("invoke-id", ""))
        self._invoke_lines = []
        endpoint = self.executor_endpoint
        future: Future[InvocationResult] = Future()
        endpoint.invocation_future = future
        endpoint.logs = None
        started = time.monotonic()
        url = f"http://{LOOPBACK}:{endpoint.container_port}/invoke"
        response = requests.post(url, json=payload, proxies={"http": "", "https": ""}, timeout=30)
        if not response.ok:
            raise InvokeSendError(f"Invoke to {url} failed with HTTP {response.status_code}")
        try:
            return future.result(timeout=max(timeout - (time.monotonic() - started), 0.0))
        except FutureTimeout:
            LOG.info("invocation %s exceeded its %.0f s timeout; killing it", self._request_id, timeout)
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            self._terminate(process)  # no grace: on AWS a timed-out runtime is killed outright
        message = f"RequestId: {self._request_id} Error: Task timed out after {timeout:.2f} seconds"
        result = self._result(
            _error_payload("Sandbox.Timedout", message),
            extra=[f"{_timestamp()} {self._request_id} Task timed out after {timeout:.2f} seconds"],
        )
        self._settle(future, result)
        LOG.info("Lambda %s timed out after %.2f s", self.function_version.id.function_name, timeout)
        return future.result()

    def _result(self, payload: bytes, extra: list[str]) -> InvocationResult:
        # Logs as far as we saw them, plus the platform's END/REPORT lines the child never got to write.
        lines = list(self._invoke_lines or []) + extra
        lines += [f"END RequestId: {self._request_id}", f"REPORT RequestId: {self._request_id}"]
        return InvocationResult(self._request_id, payload, is_error=True, logs="\n".join(lines) + "\n")

    def _restart(self) -> None:
        endpoint = self.executor_endpoint
        endpoint.startup_future = Future()
        self._spawn()
        try:
            endpoint.startup_future.result(timeout=config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT)
        except FutureTimeout as exc:
            raise LambdaRuntimeException(f"Environment {self.id} did not re-initialise in time") from exc

    # --- addresses and logs ----------------------------------------------------------------------------

    def get_address(self) -> str:
        """The child listens on loopback."""
        return LOOPBACK

    def get_endpoint_from_executor(self) -> str:
        """LocalStack as the child sees it (also becomes the function's AWS_ENDPOINT_URL host)."""
        return LOOPBACK

    def get_runtime_endpoint(self) -> str:
        """Base URL of this executor's callback routes."""
        port = config.GATEWAY_LISTEN[0].port
        return f"http://{LOOPBACK}:{port}{self.executor_endpoint.get_endpoint_prefix()}"

    def get_logs(self) -> str:
        """The child's recent output."""
        return "\n".join(self._tail)

    # --- versions --------------------------------------------------------------------------------------

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        """Accept zip-packaged Python functions and unzip their code."""
        cfg = function_version.config
        if cfg.package_type != PackageType.Zip or not str(cfg.runtime or "").startswith("python"):
            kind = cfg.runtime or cfg.package_type
            raise LambdaRuntimeException(f"Local executor runs zip-packaged Python functions only: {kind}")
        if runtime_python() is None:
            raise LambdaRuntimeException(f"Set {PYTHON_ENV} to the Lambda runtime interpreter")
        if cfg.code:
            cfg.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        """Nothing to undo: the unzipped code belongs to LocalStack's code store."""

    @classmethod
    def validate_environment(cls) -> bool:
        """Warn at startup when the runtime interpreter is missing."""
        if runtime_python() is None:
            LOG.warning("Lambda functions cannot run: %s must name the runtime interpreter", PYTHON_ENV)
            return False
        return True
