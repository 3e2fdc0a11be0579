"""Code executors for other agent frameworks, each behind its own optional extra.

- :mod:`sandcrew.integrations.autogen` — ``SandcrewCodeExecutor`` for AutoGen 0.4+
  (``pip install 'sandcrew[autogen]'``);
- :mod:`sandcrew.integrations.ag2` — ``SandcrewSandboxFactory`` for AG2 1.x
  (``pip install 'sandcrew[ag2]'``).

Importing this package imports neither framework.
"""

__all__: list[str] = []
