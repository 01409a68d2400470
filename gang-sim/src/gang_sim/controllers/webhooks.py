"""Admission webhooks of the simulated add-ons (Kueue's Job and Pod webhooks).

The Store has no webhook registry, so :func:`install` wraps the Store instance's ``create`` method:
every create, from HTTP clients and controllers alike, passes through the mutators before the Store's
own admission runs, which is where a real apiserver calls mutating webhooks, then through the
validators (Kueue's TAS checks of a Job, :mod:`.kueue.job_validation`), which refuse it with their
``ApiError``; a refused object that the Store's own validation would refuse too gets the Store's
answer, as a real apiserver validates an object before it calls validating webhooks.
:func:`install` returns a function that removes the wrapper. Updates are not passed to webhooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gang_sim.apiserver.errors import ApiError
from gang_sim.apiserver.object_copy import json_copy
from gang_sim.controllers.kueue.job_validation import validate_on_create
from gang_sim.controllers.kueue.workloads import mutate_on_create

Mutator = Callable[[str, dict[str, Any]], None]
MUTATORS: tuple[Mutator, ...] = (mutate_on_create,)
VALIDATORS: tuple[Mutator, ...] = (validate_on_create,)


def install(
    store: Any, mutators: tuple[Mutator, ...] = MUTATORS, validators: tuple[Mutator, ...] = VALIDATORS
) -> Callable[[], None]:
    original = store.create

    def create(resource: str, body: dict[str, Any], namespace: str | None = None, **options: Any) -> Any:
        try:
            key = store.resolve(resource).key
        except Exception:  # unknown resource: let the Store produce its own 404
            return original(resource, body, namespace, **options)
        mutated = json_copy(body)  # a request body or a controller's manifest: a JSON document
        for mutate in mutators:
            mutate(key, mutated)
        try:
            for validate in validators:
                validate(key, mutated)
        except ApiError:
            original(resource, mutated, namespace, **{**options, "dry_run": True})  # its own refusal first
            raise
        return original(resource, mutated, namespace, **options)

    store.create = create

    def uninstall() -> None:
        if store.create is create:
            del store.create

    return uninstall
