"""Issue 11, cases 1, 2 and 7 over the real MariaDB and Redis (moto S3/SQS): the scenarios of
tests/fixtures/reuse.py, the same ones tests/unit/test_uploads.py runs over the fakes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest

from fixtures import reuse
from pdfbatch.services.deps import Deps
from plugins.services import add_users

pytestmark = pytest.mark.integration


def world(deps: Deps, db: Any) -> reuse.World:
    clock = reuse.ManualClock()
    return reuse.World(replace(deps, clock=clock), lambda e: add_users(db, e)[e], clock.advance)


@pytest.fixture()
def unversioned(deps: Deps, db: Any) -> Iterator[reuse.World]:
    """The same real ledger and counters over a second bucket that keeps no versions."""
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = f"{deps.settings.bucket}-nv"
    s3.create_bucket(Bucket=bucket)
    yield world(replace(deps, settings=replace(deps.settings, bucket=bucket)), db)


def test_a_zip_posted_again_after_the_first_batch_finished_is_a_batch_of_its_own(deps: Deps, db: Any) -> None:
    reuse.scenario_reused_after_the_first_batch_finished(world(deps, db))


def test_duplicate_notifications_of_either_upload_find_their_own_batch(deps: Deps, db: Any) -> None:
    reuse.scenario_duplicates_of_either_upload(world(deps, db))


def test_a_zip_posted_again_while_the_first_unzip_is_retried_never_mixes_names_and_content(
    deps: Deps, db: Any
) -> None:
    reuse.scenario_reused_while_the_first_unzip_is_retried(world(deps, db))


def test_without_bucket_versions_a_zip_replaced_during_the_retry_fails_its_files_loudly(
    unversioned: reuse.World,
) -> None:
    reuse.scenario_unversioned_zip_replaced_during_the_retry(unversioned)


def test_without_bucket_versions_a_zip_replaced_before_unzip_read_it_fails_its_batch_zip_replaced(
    unversioned: reuse.World,
) -> None:
    reuse.scenario_unversioned_zip_replaced_before_it_was_read(unversioned)


def test_a_delivery_that_loses_its_link_never_deletes_the_object_another_batch_links(
    deps: Deps, db: Any
) -> None:
    reuse.scenario_lost_link_keeps_the_object_another_batch_links(world(deps, db))


def test_a_slow_upload_arriving_after_its_batch_expired_is_processed_under_the_same_id(
    deps: Deps, db: Any
) -> None:
    reuse.scenario_slow_upload_after_its_batch_expired(world(deps, db))


def test_a_batch_whose_upload_arrived_is_not_expired_while_its_unzip_is_retried(deps: Deps, db: Any) -> None:
    reuse.scenario_claimed_batch_is_not_expired_while_its_unzip_is_retried(world(deps, db))
