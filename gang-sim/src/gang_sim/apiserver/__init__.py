"""The emulated kube-apiserver: storage, admission, watches and the HTTPS API in front of them.

- Storage: :mod:`.store` (the API verbs: create, get, list, update, patch, apply, delete) over
  :mod:`.deletion` (removal, applying deletion plans) over :mod:`.object_table` (one table per
  resource type; label/field indexes in :mod:`.object_index`, ownerReferences in
  :mod:`.owner_index`), :mod:`.watch` (event history, resume, 410 Gone), :mod:`.garbage`
  (owner-reference garbage collection as a plan the store applies), :mod:`.logs` (container logs).
- Admission and encoding: :mod:`.registry` (resource types, as discovery serves them), :mod:`.kinds`
  (per-kind defaulting and validation), :mod:`.validation` (OpenAPI v3 schemas with ``jsonschema``),
  :mod:`.cel_expressions` (``x-kubernetes-validations`` with a real CEL library), :mod:`.patches`,
  :mod:`.managed_fields` and :mod:`.server_side_apply`, :mod:`.selectors`, :mod:`.errors` (``Status``).
- :mod:`.crds` installs the real CRDs shipped in ``crds/``.
- Serving: :mod:`.http` (the aiohttp application: Kubernetes paths and ``/_sim/`` control
  endpoints), :mod:`.server` (the :class:`~.server.Emulator`: HTTPS with :mod:`.tls`, a
  :mod:`.kubeconfig` for clients).

Layers, checked by ``lint-imports``: ``server -> http -> crds -> store -> deletion -> storage
internals -> leaves``; nothing below the HTTP layer imports it. Upstream counterparts: ``k8s.io/apiserver``
(``pkg/registry/generic/registry/store.go``, ``pkg/endpoints/handlers``) and
``k8s.io/apiextensions-apiserver``.
"""
