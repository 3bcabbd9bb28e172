"""The base shared by ``zmp_walker`` and ``whole_body_control``, below both.

* :mod:`.errors`: the exception root :class:`~.errors.WbcError` and :class:`~.errors.ConfigError`;
* :mod:`.yaml_config`: YAML -> validated frozen dataclasses (closest-key hints);
* :mod:`.qp_backend`: ``proxsuite`` in its reproducible (SSE2) build;
* :mod:`.share`: where ``config/``, ``urdf/`` and ``launch/`` are (checkout or install).

It lives in ``zmp_walker``, the lower of the two packages: the walker imports it
and nothing above; ``whole_body_control`` imports it and the walker.  Modules
here import neither package outside ``zmp_walker.base`` (``test/test_layers.py``).
"""
