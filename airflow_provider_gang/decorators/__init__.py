"""TaskFlow decorators: ``@task.gang`` (:mod:`.gang`), registered in ``get_provider_info``."""
