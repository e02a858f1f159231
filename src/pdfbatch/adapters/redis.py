"""Live progress of each batch in Redis: one hash and one set of counted entry indices per batch.

Every update is a Lua script, so "count this file once" is a single atomic step (no WATCH/MULTI
retry loops) and the TTL is refreshed on every write. Keys carry the batch id as a hash tag, so
both keys of a batch live on one slot of a Redis Cluster too.

The hash's layout (field names, ``totalFiles`` -1 for "not known yet", ``reason:<r>`` counters,
timestamps as seconds with three decimals) lives here only: callers get and give ``LiveProgress``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis

from pdfbatch.errors import DependencyUnavailable, ProgressMissing
from pdfbatch.model import COUNTED_OUTCOMES
from pdfbatch.ports import LiveProgress

_COMPLETE_IF_DONE = """
local function complete_if_done(key, now)
  local st = redis.call('HGET', key, 'status')
  if st == 'COMPLETED' or st == 'FAILED' then return st end
  if redis.call('HGET', key, 'unpacked') ~= '1' then return st end
  local total = tonumber(redis.call('HGET', key, 'totalFiles') or '-1')
  local processed = tonumber(redis.call('HGET', key, 'processed') or '0')
  if total >= 0 and processed >= total then
    redis.call('HSET', key, 'status', 'COMPLETED', 'completedAt', now, 'updatedAt', now)
    return 'COMPLETED'
  end
  return st
end
local function new_counters(key, now)
  redis.call('HSET', key, 'processed', 0, 'linked', 0, 'skipped_no_match', 0,
             'skipped_already_exists', 0, 'failed', 0, 'unpacked', 0, 'createdAt', now, 'updatedAt', now)
end
local function touch(ttl)
  redis.call('EXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ttl) end
end
"""

# KEYS: hash, done set. ARGV: status, totalFiles ('' = unknown), now, ttl, ignored
_INIT = (
    _COMPLETE_IF_DONE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then
  new_counters(KEYS[1], ARGV[3])
  redis.call('HSET', KEYS[1], 'status', ARGV[1], 'ignored', ARGV[5])
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'totalFiles', ARGV[2]) end
else
  local st = redis.call('HGET', KEYS[1], 'status')
  if st ~= 'COMPLETED' and st ~= 'FAILED' and not (ARGV[1] == 'PENDING' and st == 'PROCESSING') then
    redis.call('HSET', KEYS[1], 'status', ARGV[1], 'updatedAt', ARGV[3], 'ignored', ARGV[5])
    if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'totalFiles', ARGV[2]) end
  end
end
if redis.call('HGET', KEYS[1], 'status') == 'PROCESSING' then
  redis.call('HSETNX', KEYS[1], 'startedAt', ARGV[3])
end
touch(ARGV[4])
return redis.call('HGET', KEYS[1], 'status')
"""
)

# KEYS: hash, done set. ARGV: index, outcome, reason, now, ttl
_COUNT = (
    _COMPLETE_IF_DONE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, ''} end
local added = redis.call('SADD', KEYS[2], ARGV[1])
if added == 1 then
  redis.call('HINCRBY', KEYS[1], 'processed', 1)
  redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
  redis.call('HINCRBY', KEYS[1], 'reason:' .. ARGV[3], 1)
  redis.call('HSET', KEYS[1], 'updatedAt', ARGV[4])
  if redis.call('HEXISTS', KEYS[1], 'firstDoneAt') == 0 then
    redis.call('HSET', KEYS[1], 'firstDoneAt', ARGV[4])
  end
end
local st = complete_if_done(KEYS[1], ARGV[4])
touch(ARGV[5])
return {added, st}
"""
)

# KEYS: hash, done set. ARGV: totalFiles, now, ttl
_UNPACKED = (
    _COMPLETE_IF_DONE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'COMPLETED' and st ~= 'FAILED' then
  redis.call('HSET', KEYS[1], 'unpacked', 1, 'totalFiles', ARGV[1], 'unpackedAt', ARGV[2],
             'updatedAt', ARGV[2])
end
st = complete_if_done(KEYS[1], ARGV[2])
touch(ARGV[3])
return st
"""
)

# KEYS: hash, done set. ARGV: reason, now, ttl
_FAIL = (
    _COMPLETE_IF_DONE
    + """
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'COMPLETED' and st ~= 'FAILED' then
  if not st then
    new_counters(KEYS[1], ARGV[2])
  end
  redis.call('HSET', KEYS[1], 'status', 'FAILED', 'reason', ARGV[1], 'completedAt', ARGV[2],
             'updatedAt', ARGV[2])
end
touch(ARGV[3])
return redis.call('HGET', KEYS[1], 'status')
"""
)

# KEYS: hash, done set. ARGV: ttl, npairs, field1, value1, ..., then done indices
_REBUILD = (
    _COMPLETE_IF_DONE
    + """
if ARGV[3] == '1' then redis.call('DEL', KEYS[1], KEYS[2])
elseif redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local npairs = tonumber(ARGV[2])
for i = 0, npairs - 1 do
  redis.call('HSET', KEYS[1], ARGV[4 + 2 * i], ARGV[5 + 2 * i])
end
redis.call('DEL', KEYS[2])
for i = 4 + 2 * npairs, #ARGV do
  redis.call('SADD', KEYS[2], ARGV[i])
end
touch(ARGV[1])
return 1
"""
)

# KEYS: hash, done set. ARGV: index, outcome, reason, now, ttl
_UNCOUNT = (
    _COMPLETE_IF_DONE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, ''} end
local removed = redis.call('SREM', KEYS[2], ARGV[1])
if removed == 1 then
  for _, name in ipairs({'processed', ARGV[2], 'reason:' .. ARGV[3]}) do
    if tonumber(redis.call('HGET', KEYS[1], name) or '0') > 0 then
      redis.call('HINCRBY', KEYS[1], name, -1)
    end
  end
end
if redis.call('HGET', KEYS[1], 'status') == 'COMPLETED' then
  redis.call('HSET', KEYS[1], 'status', 'PROCESSING')
  redis.call('HDEL', KEYS[1], 'completedAt')
end
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[4])
touch(ARGV[5])
return {removed, redis.call('HGET', KEYS[1], 'status')}
"""
)


# KEYS: hash, done set. ARGV: the later batch id. The list is comma-separated batch ids (hex, no commas).
_NOTE_LATER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local later = redis.call('HGET', KEYS[1], 'laterUploads')
if not later or later == '' then
  redis.call('HSET', KEYS[1], 'laterUploads', ARGV[1])
elseif not string.find(',' .. later .. ',', ',' .. ARGV[1] .. ',', 1, true) then
  redis.call('HSET', KEYS[1], 'laterUploads', later .. ',' .. ARGV[1])
end
return 1
"""

_REASON = "reason:"  # prefix of the per-reason counters
_NO_TOTAL = "-1"  # totalFiles before unzip has inspected the ZIP


def live_progress(raw: Mapping[str, str]) -> LiveProgress:
    """A progress hash as its typed value (absent counters read as 0, absent timestamps as None)."""
    total = raw.get("totalFiles")
    return LiveProgress(
        status=raw.get("status"),
        total_files=_counter(total) if total not in (None, "", _NO_TOTAL) else None,
        processed=_counter(raw.get("processed")),
        outcomes={o: _counter(raw.get(o)) for o in COUNTED_OUTCOMES},
        reasons={k.removeprefix(_REASON): _counter(v) for k, v in raw.items() if k.startswith(_REASON)},
        ignored=_counter(raw.get("ignored")),
        unpacked=raw.get("unpacked") == "1",
        reason=raw.get("reason"),
        created_at=_stamp(raw.get("createdAt")),
        updated_at=_stamp(raw.get("updatedAt")),
        started_at=_stamp(raw.get("startedAt")),
        unpacked_at=_stamp(raw.get("unpackedAt")),
        completed_at=_stamp(raw.get("completedAt")),
        first_done_at=_stamp(raw.get("firstDoneAt")),
        rebuilt_at=_stamp(raw.get("rebuiltAt")),
        later_uploads=tuple(b for b in (raw.get("laterUploads") or "").split(",") if b),
    )


def hash_fields(live: LiveProgress) -> dict[str, str]:
    """The hash fields that hold ``live`` (what ``rebuild`` writes); ``live_progress`` reads them back."""
    fields = {
        "totalFiles": str(live.total_files) if live.total_files is not None else _NO_TOTAL,
        "unpacked": "1" if live.unpacked else "0",
        "ignored": str(live.ignored),
        "processed": str(live.processed),
        **{o: str(live.outcomes.get(o, 0)) for o in COUNTED_OUTCOMES},
        **{f"{_REASON}{r}": str(n) for r, n in live.reasons.items()},
    }
    if live.status:
        fields["status"] = live.status
    if live.reason:
        fields["reason"] = live.reason
    if live.later_uploads:
        fields["laterUploads"] = ",".join(live.later_uploads)
    stamps = {
        "createdAt": live.created_at,
        "updatedAt": live.updated_at,
        "startedAt": live.started_at,
        "unpackedAt": live.unpacked_at,
        "completedAt": live.completed_at,
        "firstDoneAt": live.first_done_at,
        "rebuiltAt": live.rebuilt_at,
    }
    fields.update({name: _ts(at) for name, at in stamps.items() if at})
    return fields


def progress_key(batch_id: str) -> str:
    """The hash holding a batch's live counters."""
    return f"pdfbatch:{{{batch_id}}}:progress"


def done_key(batch_id: str) -> str:
    """The set of entry indices already counted for a batch."""
    return f"pdfbatch:{{{batch_id}}}:done"


class RedisProgress:
    """Progress counters over a redis-py client (thread-safe: it pools connections)."""

    def __init__(self, client: redis.Redis[str], ttl_seconds: int = 3600) -> None:
        self.client = client
        self.ttl = ttl_seconds
        self._init = client.register_script(_INIT)
        self._count = client.register_script(_COUNT)
        self._unpacked = client.register_script(_UNPACKED)
        self._fail = client.register_script(_FAIL)
        self._rebuild = client.register_script(_REBUILD)
        self._uncount = client.register_script(_UNCOUNT)
        self._note_later = client.register_script(_NOTE_LATER)

    @classmethod
    def from_url(cls, url: str, ttl_seconds: int = 3600) -> RedisProgress:
        """Build from a redis:// URL (connections open lazily)."""
        client = redis.Redis.from_url(
            url, socket_connect_timeout=3, socket_timeout=5, health_check_interval=30, decode_responses=True
        )
        return cls(client, ttl_seconds)

    def _run(self, script: Any, batch_id: str, args: Sequence[Any]) -> Any:
        try:
            return script(keys=[progress_key(batch_id), done_key(batch_id)], args=list(args))
        except redis.exceptions.RedisError as exc:
            raise DependencyUnavailable("redis", type(exc).__name__) from exc

    def init_batch(
        self, batch_id: str, status: str, total_files: int | None, now: float, ignored: int = 0
    ) -> None:
        """Create the hash (counters at 0) or update status/total of a non-final batch."""
        total = "" if total_files is None else str(total_files)
        self._run(self._init, batch_id, [status, total, _ts(now), self.ttl, ignored])

    def count(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Count one file once; return (newly counted, status)."""
        added, status = self._run(self._count, batch_id, [index, outcome, reason, _ts(now), self.ttl])
        if int(added) == -1:
            raise ProgressMissing(batch_id)
        return int(added) == 1, str(status)

    def mark_unpacked(self, batch_id: str, total_files: int, now: float) -> str:
        """Unpacking finished; returns the status afterwards."""
        status = self._run(self._unpacked, batch_id, [total_files, _ts(now), self.ttl])
        if status == -1:
            raise ProgressMissing(batch_id)
        return str(status)

    def fail(self, batch_id: str, reason: str, now: float) -> None:
        """Mark the batch FAILED (unless already final)."""
        self._run(self._fail, batch_id, [reason, _ts(now), self.ttl])

    def get(self, batch_id: str) -> LiveProgress | None:
        """The batch's counters, or None when the hash is missing."""
        try:
            data = self.client.hgetall(progress_key(batch_id))
        except redis.exceptions.RedisError as exc:
            raise DependencyUnavailable("redis", type(exc).__name__) from exc
        return live_progress(data) if data else None

    def rebuild(self, batch_id: str, live: LiveProgress, done: Sequence[int], replace: bool = False) -> bool:
        """Recreate the hash and done set from a ledger snapshot unless the hash exists (or ``replace``)."""
        fields = hash_fields(live)
        args: list[Any] = [self.ttl, len(fields), "1" if replace else "0"]
        for name, value in fields.items():
            args.extend([name, value])
        args.extend(done)
        return int(self._run(self._rebuild, batch_id, args)) == 1

    def uncount(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Take one counted file back out (counters never below 0); a COMPLETED batch is PROCESSING again."""
        removed, status = self._run(self._uncount, batch_id, [index, outcome, reason, _ts(now), self.ttl])
        if int(removed) == -1:
            raise ProgressMissing(batch_id)
        return int(removed) == 1, str(status)

    def note_later_upload(self, batch_id: str, later_id: str) -> bool:
        """Add a later upload's batch to the hash's list (once); False when the hash is gone.

        The hash's TTL is left as it is: a batch's counters live as long as its own activity keeps them.
        """
        return int(self._run(self._note_later, batch_id, [later_id])) == 1

    def ping(self) -> None:
        """Raise DependencyUnavailable when Redis does not answer."""
        try:
            self.client.ping()
        except redis.exceptions.RedisError as exc:
            raise DependencyUnavailable("redis", type(exc).__name__) from exc


def _ts(now: float) -> str:
    return f"{now:.3f}"


def _counter(value: str | None) -> int:
    # Only the scripts write counters (integers); a field that is absent, or unreadable, counts as 0.
    try:
        return int(float(value)) if value not in (None, "") else 0
    except ValueError:
        return 0


def _stamp(value: str | None) -> float | None:
    # A timestamp field: absent (not happened yet) or unreadable is None.
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None
