"""pdfbatch.matching: the rule that turns the addresses seen on each page and the users rows into who a
PDF is linked to (pure: no PDF, no database)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from pdfbatch.matching import Decision, MatchPolicy, Readings, decide, normalise
from pdfbatch.model import REASON_OUTCOME, Outcome, Reason


@dataclass(frozen=True)
class Row:
    id: str
    email: str


ANNA, BOB, BOB_TWIN = Row("1", "anna@example.com"), Row("2", "bob@example.com"), Row("3", "bob@example.com")


def test_one_user_on_the_first_page_naming_users_is_matched() -> None:
    # GIVEN page 1 naming nobody known, page 2 naming Anna beside a stranger
    pages = [["stranger@example.org"], ["hr@agency.example", "anna@example.com"]]
    # WHEN decided  THEN Anna, on page 2
    assert decide(pages, [ANNA]) == Decision(Reason.MATCHED, ANNA, 1, 2, "anna@example.com")


def test_two_users_on_the_deciding_page_are_ambiguous_whoever_comes_first() -> None:
    # GIVEN a page naming Anna and Bob (a cover letter "To: anna" from "bob")
    decision = decide([["anna@example.com", "bob@example.com"]], [BOB, ANNA])
    # THEN nobody, with the count and never a name
    assert decision == Decision(Reason.AMBIGUOUS, None, 2, 1, None)


def test_a_user_named_on_a_later_page_does_not_matter() -> None:
    # GIVEN Anna on page 1, Bob on page 2 (both pages read)
    decision = decide([["anna@example.com"], ["bob@example.com"]], [ANNA, BOB])
    # THEN page 1 decided alone
    assert decision is not None and (decision.reason, decision.user, decision.page) == (
        Reason.MATCHED,
        ANNA,
        1,
    )


def test_one_address_shared_by_two_rows_is_ambiguous_under_both_policies() -> None:
    for policy in MatchPolicy:
        decision = decide([["bob@example.com"]], [BOB, BOB_TWIN], policy)
        assert decision is not None and (decision.reason, decision.users_named) == (Reason.AMBIGUOUS, 2)


def test_the_same_row_twice_or_two_addresses_of_one_user_are_one_user() -> None:
    anna_work = Row("1", "anna@work.example")
    decision = decide([["anna@example.com", "anna@work.example"]], [ANNA, ANNA, anna_work])
    assert decision is not None and (decision.reason, decision.user) == (Reason.MATCHED, ANNA)


def test_policy_first_takes_the_first_user_in_document_order() -> None:
    decision = decide([["bob@example.com", "anna@example.com"]], [ANNA, BOB], MatchPolicy.FIRST)
    assert decision == Decision(Reason.MATCHED, BOB, 1, 1, "bob@example.com")


def test_no_decision_until_the_document_is_complete() -> None:
    assert decide([["stranger@example.org"], []], [ANNA]) is None


@pytest.mark.parametrize(
    ("pages", "any_text", "reason"),
    [
        ([["stranger@example.org"]], True, Reason.NO_USER),
        ([[], []], True, Reason.NO_EMAIL),
        ([[]], False, Reason.NO_TEXT_LAYER),
        ([], False, Reason.NO_TEXT_LAYER),
    ],
)
def test_the_end_of_the_document_says_why_nobody(
    pages: list[list[str]], any_text: bool, reason: Reason
) -> None:
    assert decide(pages, [ANNA], complete=True, any_text=any_text) == Decision(reason)


def test_stored_addresses_are_compared_trimmed_nfc_and_lowercased_never_fuzzily() -> None:
    stored = Row("9", " Élise@Example.COM ")
    assert normalise("E\u0301lise@example.com") == "élise@example.com"
    decision = decide([["élise@example.com"]], [stored])
    assert decision is not None and decision.user == stored
    assert decide([["elise@example.com"]], [stored]) is None


def test_ambiguous_is_a_skip() -> None:
    assert REASON_OUTCOME[Reason.AMBIGUOUS] == Outcome.SKIPPED_NO_MATCH
    assert REASON_OUTCOME[Reason.AMBIGUOUS_WRAP] == Outcome.SKIPPED_NO_MATCH


@pytest.mark.parametrize("policy", list(MatchPolicy))
def test_readings_that_name_different_users_or_nobody_link_nobody(policy: MatchPolicy) -> None:
    # GIVEN one place read two ways: Anna or Bob, Anna or nobody
    for readings in (Readings(("anna@example.com", "bob@example.com")), Readings(("anna@example.com", None))):
        # WHEN decided  THEN nobody, and the page decides (the next page's Bob does not count)
        decision = decide([[readings], ["bob@example.com"]], [ANNA, BOB], policy)
        assert decision == Decision(Reason.AMBIGUOUS_WRAP, page=1), readings


def test_readings_that_all_name_one_user_link_that_user() -> None:
    # GIVEN a place read as Anna or nobody on a page that also shows Anna's address plainly
    pages: list[list[str | Readings]] = [["anna@example.com", Readings(("anna@example.com", None))]]
    # THEN every combination names Anna: linked
    assert decide(pages, [ANNA]) == Decision(Reason.MATCHED, ANNA, 1, 1, "anna@example.com")
    # AND readings that name nobody known decide nothing
    assert decide([[Readings(("x@example.com", None))]], [ANNA]) is None
    assert decide([[Readings(("x@example.com", None))]], [ANNA], complete=True) == Decision(Reason.NO_USER)


_emails = st.sampled_from([f"u{i}@example.com" for i in range(6)])
_rows = st.lists(st.builds(Row, st.sampled_from(["1", "2", "3", "4"]), _emails), max_size=8)
_pages = st.lists(st.lists(_emails, max_size=4), max_size=5)


@settings(max_examples=examples(300), deadline=None)
@given(_pages, _rows, st.sampled_from(list(MatchPolicy)))
def test_a_match_is_always_the_only_user_of_the_first_page_naming_one(
    pages: list[list[str]], rows: list[Row], policy: MatchPolicy
) -> None:
    # GIVEN any pages and rows  WHEN decided over the whole document
    decision = decide(pages, rows, policy, complete=True)
    known = {r.email for r in rows}
    first = next((i for i, page in enumerate(pages, 1) if known.intersection(page)), None)
    if first is None:
        # THEN with no user named, never a match
        assert decision.reason in (Reason.NO_USER, Reason.NO_EMAIL)
        return
    page = pages[first - 1]
    named = [e for e in page if e in known][: 1 if policy is MatchPolicy.FIRST else None]
    ids = {r.id for r in rows if r.email in named}
    # THEN the first page naming a user decides, and a link goes to its one user only
    assert decision.page == first
    assert decision.users_named == len(ids)
    if len(ids) == 1:
        assert decision.reason == Reason.MATCHED and decision.user is not None and decision.user.id in ids
    else:
        assert (decision.reason, decision.user) == (Reason.AMBIGUOUS, None)
