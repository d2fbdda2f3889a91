"""pipeline: Spark.

Will hold the ``jetstream`` PySpark data source (batch and streaming reads with
stream sequences as offsets, writer with msg-id dedupe) and jobs built on it.
May import anything; nothing imports it.
"""
