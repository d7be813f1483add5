"""The analysis suite's SparkSession is the ``spark`` fixture of tests/conftest.py (one for
the whole run, shared with the tests that judge real runs with both engines)."""
