"""One check of Kubernetes qualified names (``toposched.inputs``), shared by manifests and plugin args.

``qualified_name_problems`` says what is wrong in apimachinery's words (``IsQualifiedName``);
``check_qualified_name`` refuses exactly the names that have a problem; the plugin args'
validation (``ignoredResources``) reports the same problems.
"""

import pytest

from toposched.errors import InputError
from toposched.inputs import (
    check_dns_label,
    check_dns_subdomain,
    check_labels,
    check_qualified_name,
    qualified_name_problems,
)
from toposched.scheduler.plugin_args import NodeResourcesFitArgs, plugin_args

VALID = ["cpu", "nvidia.com/gpu", "example.com/My_Name.1", "a", "x" * 63, "a" * 253 + "/b"]
INVALID = {
    "a/b/c": "with an optional DNS subdomain prefix and '/'",
    "": "name part must be non-empty",
    "/x": "prefix part must be non-empty",
    "example.com/": "name part must be non-empty",
    "Example.com/x": "prefix part a lowercase RFC 1123 subdomain",
    "a" * 254 + "/b": "prefix part must be no more than 253 characters",
    "x" * 64: "name part must be no more than 63 characters",
    "-x": "name part must consist of alphanumeric characters",
    "x\n": "name part must consist of alphanumeric characters",  # a trailing newline is no name character
}


@pytest.mark.parametrize("name", VALID)
def test_a_qualified_name_has_no_problem_and_passes(name):
    assert qualified_name_problems(name) == []
    assert check_qualified_name(name, field="f") == name


@pytest.mark.parametrize("name", INVALID)
def test_each_problem_is_named_and_the_name_refused(name):
    assert any(INVALID[name] in problem for problem in qualified_name_problems(name))
    with pytest.raises(InputError, match="is not a qualified name"):
        check_qualified_name(name, field="f")


@pytest.mark.parametrize("name", INVALID)
def test_plugin_args_report_the_same_problems(name):
    with pytest.raises(InputError) as err:
        plugin_args(NodeResourcesFitArgs, {"ignoredResources": [name]}, "NodeResourcesFit")
    assert "; ".join(qualified_name_problems(name)) in str(err.value)


@pytest.mark.parametrize(("check", "value"), [
    (check_dns_subdomain, "node-1\n"), (check_dns_label, "app\n"), (check_dns_subdomain, "node-1.example\n"),
])
def test_a_name_with_a_trailing_newline_is_refused(check, value):
    """``$`` in a pattern also matches before a final newline: the whole name must match, not a prefix."""
    assert check(value.rstrip("\n"), field="f") == value.rstrip("\n")
    with pytest.raises(InputError, match="is not a valid name"):
        check(value, field="f")


def test_a_label_value_with_a_trailing_newline_is_refused():
    assert check_labels({"pool": "gpu"}, field="labels") == {"pool": "gpu"}
    with pytest.raises(InputError, match="is not a valid label value"):
        check_labels({"pool": "gpu\n"}, field="labels")
