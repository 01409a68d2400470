"""Bearer-token authentication and per-user rules, with RBAC's answers.

Each token maps to a user; each user has rules ``(verbs, groups, resources)`` where ``"*"`` matches
anything and a resource may name a subresource (``pods/log``), optionally restricted to object ``names``
(RBAC's ``resourceNames``; a LIST or WATCH is authorized for the name of its ``metadata.name`` field
selector, ``paths.authorized_name``). A request without a known token is
401 Unauthorized; one no rule allows is 403 Forbidden with the RBAC authorizer's message. A
``SelfSubjectAccessReview`` asks the same rules (``authorization.k8s.io/v1``).

Every authenticated user may create ``SelfSubjectAccessReview``s whatever its rules say, as on a
real cluster: the bootstrap ClusterRole ``system:basic-user`` (bound to ``system:authenticated``)
grants ``create`` on ``selfsubjectaccessreviews`` and ``selfsubjectrulesreviews``
(``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``). The review's answer still follows
the user's own rules.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """Allow ``verbs`` on ``resources`` of API ``groups`` (core group is ``""``); with ``names``, only
    on the objects of those names (RBAC's ``resourceNames``: a request without a name - a LIST, a
    WATCH of the collection, a create - is not covered, ``ResourceNameMatches`` in
    ``kubernetes/plugin/pkg/auth/authorizer/rbac/rbac.go``)."""

    verbs: tuple[str, ...] = ("*",)
    groups: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ("*",)
    names: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, name: str | None = None) -> bool:
        return (
            ("*" in self.verbs or verb in self.verbs)
            and ("*" in self.groups or group in self.groups)
            and ("*" in self.resources or resource in self.resources)
            and (not self.names or (name is not None and name in self.names))
        )

    @classmethod
    def parse(cls, text: str) -> Rule:
        """``"get,list:batch,:jobs,pods/log"`` (verbs:groups:resources, comma-separated)."""
        verbs, groups, resources = [*text.split(":"), "*", "*"][:3]
        return cls(tuple(verbs.split(",")), tuple(groups.split(",")), tuple(resources.split(",")))


ALLOW_ALL = (Rule(),)
#: What ``system:basic-user`` grants every authenticated user (see the module docstring).
BASIC_USER = Rule(("create",), ("authorization.k8s.io",), ("selfsubjectaccessreviews", "selfsubjectrulesreviews"))


class Authorizer:
    """Tokens, users and their rules."""

    def __init__(self) -> None:
        self._users_by_token: dict[str, str] = {}
        self._rules: dict[str, tuple[Rule, ...]] = {}

    def add_user(self, user: str, rules: Iterable[Rule] = ALLOW_ALL, token: str | None = None) -> str:
        """Register (or replace the rules of) ``user``; returns its bearer token."""
        token = token or secrets.token_urlsafe(24)
        self._users_by_token[token] = user
        self._rules[user] = tuple(rules)
        return token

    def set_rules(self, user: str, rules: Iterable[Rule]) -> None:
        self._rules[user] = tuple(rules)

    def user_for(self, authorization_header: str | None) -> str | None:
        """The user of an ``Authorization: Bearer <token>`` header, or None."""
        if not authorization_header or not authorization_header.startswith("Bearer "):
            return None
        return self._users_by_token.get(authorization_header[len("Bearer ") :].strip())

    def allows(self, user: str, verb: str, group: str, resource: str, name: str | None = None) -> bool:
        """Whether ``user`` (a known one) may ``verb`` the ``resource`` of API ``group`` (the object
        ``name``, if the request names one)."""
        if BASIC_USER.allows(verb, group, resource):
            return user in self._rules
        return any(rule.allows(verb, group, resource, name) for rule in self._rules.get(user, ()))
