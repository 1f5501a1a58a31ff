"""Kubernetes quantity parsing: the apimachinery grammar, exact values, refusals."""

from fractions import Fraction

import pytest

from toposched.errors import InputError
from toposched.quantity import MAX_QUANTITY, canonical_units, check_amount, format_bytes, format_cpu, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("4Gi", 4 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1k", 1000),
        ("1M", 10**6),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        (".5", Fraction(1, 2)),
        ("2Ki", 2048),
        (3, 3),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Zi", "-1", "1.2.3", "Gi", "9Ei", "1e99", True, None])
def test_refused(text):
    with pytest.raises(InputError):
        parse_quantity(text, field="resources.requests.memory")


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [("cpu", "2", 2000), ("cpu", "100m", 100), ("cpu", "0.0001", 1), ("memory", "1Gi", 2**30), ("memory", "1.5k", 1500),
     ("nvidia.com/gpu", "2", 2)],
)
def test_canonical_units(resource, text, units):
    assert canonical_units(resource, text) == units


def test_format():
    assert format_cpu(4000) == "4" and format_cpu(1500) == "1500m"
    assert format_bytes(4 * 2**30) == "4Gi" and format_bytes(1000) == "1000" and format_bytes(0) == "0"


def test_error_names_field_and_value():
    with pytest.raises(InputError) as err:
        parse_quantity("-4Gi", field="spec.containers[0].resources.requests.memory")
    assert "spec.containers[0].resources.requests.memory" in str(err.value) and "'-4Gi'" in str(err.value)


@pytest.mark.parametrize(("value", "words"), [(-1, "not a non-negative integer"), (1.5, "not a non-negative integer"),
                                              (True, "not a non-negative integer"), ("1", "not a non-negative integer"),
                                              (MAX_QUANTITY, "absurdly large"), (10**20, "absurdly large")])
def test_check_amount_refuses_what_no_request_or_capacity_is(value, words):
    with pytest.raises(InputError, match=words) as err:
        check_amount(value, field="spec.containers[0].resources.limits.memory", source="pod default/p")
    assert err.value.field == "spec.containers[0].resources.limits.memory" and "pod default/p" in str(err.value)


def test_check_amount_keeps_the_largest_quantity_a_manifest_can_state():
    largest = canonical_units("memory", "9223372036854775")  # the largest whole number of bytes parse_quantity keeps
    with pytest.raises(InputError):
        parse_quantity("9223372036854776", field="x")
    assert check_amount(largest, field="x") == largest and check_amount(0, field="x") == 0
    assert 1000 * (MAX_QUANTITY - 1) < 2**63  # a thousand such amounts still sum within int64


def test_a_quantity_read_before_is_read_the_same_and_a_bad_one_names_each_field_it_comes_in():
    # Quantities are remembered once read; refusals are not, so each names its own field.
    assert canonical_units("memory", "4Gi", field="a") == canonical_units("memory", "4Gi", field="b") == 4 * 2**30
    assert canonical_units("cpu", 1) == 1000 and canonical_units("cpu", "1") == 1000
    for field in ("spec.containers[0].resources.limits.memory", "zones[1].resources[0].capacity"):
        with pytest.raises(InputError) as err:
            canonical_units("memory", "-1Gi", field=field)
        assert err.value.field == field
    with pytest.raises(InputError):  # a bool is no amount, though True == 1, which was read above
        canonical_units("cpu", True)


def test_a_page_size_read_before_is_read_the_same_and_a_bad_one_names_each_field():
    from toposched.inputs import hugepage_size

    assert hugepage_size("hugepages-2Mi", field="a") == hugepage_size("hugepages-2Mi", field="b") == 2 * 2**20
    for name, field in (("hugepages-x", "f1"), ("hugepages-x", "f2"), ("hugepages-0.5", "f3"), ("hugepages-0", "f4")):
        with pytest.raises(InputError) as err:
            hugepage_size(name, field=field)
        assert err.value.field == field and "does not name a page size" in err.value.message
