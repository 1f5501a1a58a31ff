"""CPUSet: the kernel's list syntax, set algebra and error messages."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toposched.errors import InputError
from toposched.topology import CPUSet


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("", []),
        ("\n", []),
        ("5", [5]),
        ("0-3,8-11", [0, 1, 2, 3, 8, 9, 10, 11]),
        ("0-3,8-11\n", [0, 1, 2, 3, 8, 9, 10, 11]),
        ("3,1,2", [1, 2, 3]),
        ("0-7:2/4", [0, 1, 4, 5]),
    ],
)
def test_parse(text, cpus):
    assert CPUSet.parse(text).sorted() == cpus


@pytest.mark.parametrize(("cpus", "text"), [([], ""), ([0], "0"), ([0, 1, 2, 3, 8, 9, 10, 11], "0-3,8-11"), ([1, 3, 5], "1,3,5")])
def test_format(cpus, text):
    assert str(CPUSet(cpus)) == text


@pytest.mark.parametrize("text", ["3-1", "a-b", "1,,2", "-1", "1-", "0-999999", "0-7:5/4", "x"])
def test_parse_errors_quote_the_text(text):
    with pytest.raises(InputError) as err:
        CPUSet.parse(text)
    assert repr(text) in str(err.value)
    assert err.value.field == "cpuset"


def test_algebra():
    a, b = CPUSet.parse("0-7"), CPUSet.parse("4-11")
    assert str(a | b) == "0-11"
    assert str(a & b) == "4-7"
    assert str(a - b) == "0-3"
    assert str(a ^ b) == "0-3,8-11"
    assert CPUSet.parse("4-5") <= a and not a <= b
    assert a.isdisjoint(CPUSet.parse("8-9"))
    assert str(b.first(3)) == "4-6"
    assert 5 in a and 9 not in a and -1 not in a
    assert len(a) == 8 and bool(CPUSet()) is False
    assert {CPUSet.parse("1-2"): 1}[CPUSet([2, 1])] == 1


def test_negative_cpu_rejected():
    with pytest.raises(InputError):
        CPUSet([-1])


@given(st.sets(st.integers(min_value=0, max_value=2048)))
def test_round_trip(cpus):
    s = CPUSet(cpus)
    assert CPUSet.parse(str(s)) == s
    assert s.sorted() == sorted(cpus)
