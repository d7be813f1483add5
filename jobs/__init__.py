"""The top layer: the commands that run a scenario and then judge it, and the ``txnchaos``
command line itself (``cli``). Here the harness (which records runs) and the analysis
(which judges them) meet; neither imports the other: the harness takes a ``Judge``
(harness/run/judge.py), and this layer hands it the analysis's (``RunJudge``)."""
