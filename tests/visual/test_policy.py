"""The policy's `visual:` key: defaults, percentages, and a bad value that names its field."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from fleet.visual.policy import Viewport, VisualPolicy


def test_defaults_are_home_plus_four_sitemap_pages_at_both_viewports() -> None:
    policy = VisualPolicy()
    assert policy.enabled and policy.pages == [] and policy.sitemap_pages == 4
    assert policy.viewports == [Viewport.desktop, Viewport.mobile]
    assert (policy.pass_threshold, policy.fail_threshold) == (0.005, 0.05)


def test_the_issues_spelling_reads_as_written() -> None:
    policy = VisualPolicy.model_validate(yaml.safe_load(
        "{pages: [/shop/, cart/, /shop/], sitemap_pages: 19, viewports: [mobile, mobile], pass: 1%, fail: '10 %'}"))
    assert policy.pages == ["shop/", "cart/"] and policy.sitemap_pages == 19 and policy.viewports == [Viewport.mobile]
    assert (policy.pass_threshold, policy.fail_threshold) == (0.01, 0.1)


@pytest.mark.parametrize(("data", "field", "words"), [
    ({"pass": "6%"}, "", "must be below fail"),
    ({"fail": 2}, "fail", "less than or equal to 1"),
    ({"sitemap_pages": -1}, "sitemap_pages", "greater than or equal to 0"),
    ({"viewports": ["tablet"]}, "viewports.0", "'desktop' or 'mobile'"),
    ({"viewports": []}, "viewports", "at least 1"),
    ({"pages": ["https://elsewhere.example/"]}, "pages", "not a path under the site's root"),
    ({"pages": ["../wp-admin/"]}, "pages", "not a path under the site's root"),
    ({"threshold": 0.1}, "threshold", "Extra inputs are not permitted"),
])
def test_a_bad_value_names_its_field(data: dict, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        VisualPolicy.model_validate(data)
    problem = caught.value.errors()[0]
    assert ".".join(map(str, problem["loc"])) == field and words in problem["msg"]
