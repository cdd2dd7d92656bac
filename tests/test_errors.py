"""Errors quote the value they refuse, cut to a readable and bounded size, in correct English."""

from inferstack.errors import SHOWN_VALUE_CHARS, Problem, shown_value, with_article


def test_a_short_value_is_shown_whole_as_python_writes_it():
    assert shown_value("us-east-1\n") == "'us-east-1\\n'" and shown_value(-3) == "-3"


def test_a_long_string_is_shown_as_its_start_and_its_length():
    assert shown_value("a" * 1000) == f"'{'a' * SHOWN_VALUE_CHARS}'… (1000 characters)"


def test_a_huge_shared_structure_is_shown_without_expanding_it():
    level = ["lol"] * 9
    for _ in range(12):  # 9**13 strings if written out: the YAML "billion laughs", already loaded
        level = [level] * 9
    shown = shown_value({"model": level})
    assert shown.startswith("{'model': [[[") and len(shown) <= SHOWN_VALUE_CHARS + 1


def test_an_integer_beyond_the_printable_digits_is_named_not_printed():
    assert shown_value(10**5000) == "<int too large to show>"


def test_a_problem_quotes_the_cut_value():
    assert str(Problem("name", "is too long", value="n" * 500, fix="shorten it")).endswith(
        "(500 characters)). Fix: shorten it"
    )


def test_the_article_follows_the_first_letter():
    assert [with_article(cloud) for cloud in ("aws", "gcp", "alibaba", "huawei")] == [
        "an aws",
        "a gcp",
        "an alibaba",
        "a huawei",
    ]
