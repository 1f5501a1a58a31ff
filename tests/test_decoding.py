"""toposched.decoding: the strict helpers every configuration reader uses."""

from __future__ import annotations

import pytest

from toposched.decoding import (
    INT32_MAX,
    boolean,
    check_fields,
    expect_list,
    expect_mapping,
    integer,
    join,
    kind_of,
    one_of,
    string,
    string_list,
)
from toposched.errors import InputError


@pytest.mark.parametrize(("value", "shown"), [
    (None, "null"), (True, "boolean true"), (5, "number 5"), (2.5, "number 2.5"), ("x", 'string "x"'),
    ([1], "a list"), ({"a": 1}, "an object"),
])
def test_kind_of_says_what_a_value_is(value, shown):
    assert kind_of(value) == shown


@pytest.mark.parametrize(("path", "child", "joined"), [
    ("", "a", "a"), ("a", "", "a"), ("a", "b", "a.b"), ("a", "[0]", "a[0]"), ("", None, ""),
])
def test_join_builds_field_paths(path, child, joined):
    assert join(path, child) == joined


@pytest.mark.parametrize(("call", "field", "problem"), [
    (lambda: expect_mapping([1], "spec"), "spec", "expected an object, got a list"),
    (lambda: expect_list({"a": 1}, "items"), "items", "expected a list, got an object"),
    (lambda: string(3, "name"), "name", "expected a string, got number 3"),
    (lambda: string_list(["a", 3], "names"), "names[1]", "expected a string"),
    (lambda: integer(True, "n"), "n", "expected an integer, got boolean true"),
    (lambda: integer("5", "n"), "n", 'expected an integer, got string "5"'),
    (lambda: integer(INT32_MAX + 1, "n", 0, INT32_MAX), "n", "does not fit in [0, 2147483647]"),
    (lambda: boolean("yes", "flag"), "flag", "expected true or false"),
    (lambda: one_of("Sometimes", ("Never", "Always"), "mode", "Mode"), "mode",
     'Invalid value: "Sometimes": invalid Mode (one of Never, Always)'),
    (lambda: check_fields({"name": 1, "colour": 2}, ("name",), "pods[0]"), "pods[0].colour",
     'unknown field "colour" (known: name)'),
    (lambda: check_fields({"x": 1}, ("name",), ""), "x", 'unknown field "x"'),
])
def test_each_helper_names_the_field_and_the_problem(call, field, problem):
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field
    assert problem in err.value.message
    assert err.value.source is None  # the caller adds its file or object


def test_good_values_come_back_typed():
    assert expect_mapping({"a": 1}, "") == {"a": 1}
    assert expect_list([1], "") == [1]
    assert string_list(None, "") == () and string_list(["a", "b"], "") == ("a", "b")
    assert integer(7, "n", 0, 10) == 7
    assert boolean(False, "b") is False
    assert one_of("Always", ("Never", "Always"), "mode") == "Always"


def test_none_reads_as_empty_only_when_asked():
    assert expect_mapping(None, "labels", none_is_empty=True) == {}
    assert expect_list(None, "taints", none_is_empty=True) == []
    with pytest.raises(InputError):
        expect_mapping(None, "labels")
    with pytest.raises(InputError):
        expect_list(None, "taints")
