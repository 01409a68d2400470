"""The provider's only HTTP code: an async Kubernetes API client (no Airflow imports).

* :mod:`.settings` - serializable connection settings, loaded with kubernetes_asyncio's auth loaders;
* :mod:`.client` - :class:`~.client.KubeClient`, one per trigger: timeouts, retries, explicit patch types;
* :mod:`.errors` - the typed error tree (drawn in its docstring);
* :mod:`.watch` - list-then-watch with resume, bookmarks, relist on 410, reconnects;
* :mod:`.discovery` - served kinds and SelfSubjectAccessReview prechecks;
* :mod:`.resources` - the kinds and their URLs.
"""
