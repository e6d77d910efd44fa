"""The local runtime of the job tasks: what a local run (``pyflyte run`` without ``--remote``, or calling the task)
and an Elastic pod execute. Imported on the first run, never by ``import flytekitplugins.kfoperators``.

- :mod:`.world`: the rule that picks a local run's world (the job's topology, or a world of one) and runs it;
- :mod:`.plan`: job config -> :class:`~.plan.WorldPlan` (the members and the environment each one gets);
- :mod:`.environment`: the operators' environment contract (``RANK``, ``TF_CONFIG``, ``OMPI_COMM_WORLD_*``);
- :mod:`.launch`: the subprocess launcher of a world (``[role-index]`` logs, first failure, Ctrl-C);
- :mod:`.child`, :mod:`.child_main`: what each started process runs;
- :mod:`.elastic`: the one Elastic launcher (torch's ``elastic_launch``), for pods and local nodes alike;
- :mod:`.errors`: the errors a local world raises.
"""

__all__: list[str] = []
