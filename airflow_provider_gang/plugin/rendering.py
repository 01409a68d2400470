"""HTML of the two pages: the Gang view (:class:`.gang_view.Page`, ``templates/page.html.j2``) and the
Gangs page (:class:`.gangs_page.Overview`, ``templates/overview.html.j2``), through Jinja2 templates.

Autoescape is on for every ``.html.j2`` template (``jinja2.select_autoescape``,
https://jinja.palletsprojects.com/en/stable/api/#autoescaping), so each value of the page is
escaped where it is placed; an undefined name in a template raises (``StrictUndefined``) instead
of rendering empty. Jinja2 is a dependency of Airflow itself. The templates ship as package data
(``[tool.setuptools.package-data]`` in ``pyproject.toml``).
"""

from __future__ import annotations

import functools

import jinja2

from airflow_provider_gang.plugin.gang_view import Page
from airflow_provider_gang.plugin.gangs_page import Overview

PAGE_TEMPLATE = "page.html.j2"
OVERVIEW_TEMPLATE = "overview.html.j2"
OVERVIEW_URL = "/gang/ui/gangs"
"""The cluster-wide Gangs page (``routes.gangs_page``), linked from every task's page."""


@functools.cache
def environment() -> jinja2.Environment:
    """The plugin's template environment, built once per process."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("airflow_provider_gang.plugin", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def compile_templates() -> None:
    """Compile every template into :func:`environment`'s cache (Jinja2 keeps compiled templates,
    ``Environment.cache_size``), as the api-server starts: compiling is most of a first render."""
    for name in environment().list_templates(filter_func=lambda name: name.endswith(".html.j2")):
        environment().get_template(name)


def render_page(page: Page) -> str:
    """The page as an HTML document; every value escaped."""
    return (
        environment()
        .get_template(PAGE_TEMPLATE)
        .render(
            page=page,
            title=f"Gang of {page.task_id}",
            refresh_seconds=page.refresh_seconds,
            overview_url=OVERVIEW_URL,
        )
    )


def render_overview(overview: Overview) -> str:
    """The Gangs page (:class:`.gangs_page.Overview`) as an HTML document; every value escaped."""
    return (
        environment()
        .get_template(OVERVIEW_TEMPLATE)
        .render(overview=overview, title="Gangs", refresh_seconds=overview.refresh_seconds)
    )
