def test_unknown_provisioning_parameters_are_named_with_the_known_ones() -> None:
    from airflow_provider_gang.reservation import validation

    assert validation.unknown_parameters(validation.QUEUED_PROVISIONING, {"maxRunDurationSeconds": "60"}) is None
    assert validation.unknown_parameters(validation.BEST_EFFORT_ATOMIC, {"x": "1"}) == (
        "provisioning_parameters ['x'] are not read by best-effort-atomic-scale-up.autoscaling.x-k8s.io "
        "(known keys: none)"
    )
    assert validation.unknown_parameters("example.com/my-class", {"x": "1"}) is None  # a class we do not know
