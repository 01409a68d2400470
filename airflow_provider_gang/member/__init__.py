"""What runs inside a member container: standard-library programs whose source the provider sends."""
