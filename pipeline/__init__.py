"""pipeline: Spark.

* ``pipeline.jetstream`` — the ``jetstream`` PySpark data source and sink
  (``spark.dataSource.register(JetStreamDataSource)``): batch and streaming reads with stream
  sequences as offsets, batch and streaming writes with ``Nats-Msg-Id`` dedupe.
* ``pipeline.plan`` — pure planning: options, offsets, sequence ranges, message ids.
* ``pipeline.natsio`` / ``pipeline.wire`` — the JetStream wire work (nats-py; a minimal
  connection for pull responses).
* ``pipeline.analytics`` — per subject and minute metrics (``python -m pipeline.analytics``).

May import anything; nothing imports it.
"""
