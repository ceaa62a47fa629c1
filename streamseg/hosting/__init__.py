"""Model hosting: the model in this process, or in a process of its own.

* ``build``: ``build_model_stage`` (in this process or its own, by
  ``runtime.model_process``);
* ``segmenter``: ``build_segmenter`` (the model as serving runs it, warmed
  up), which both sides use;
* the parent's side of a model in its own process: ``process``
  (:class:`~streamseg.hosting.process.ModelProcess`, the client) and
  ``parent`` (one worker process as the parent holds it: start, first
  answer, end, its logs);
* the child's side: ``worker`` (the worker's loop, run in the child);
* ``wire``: what crosses between them (frames in shared memory, instances
  as numpy arrays);
* ``health``: the model's health as ``/readyz``, the console and the
  metrics show it; ``memory``: the allocator settings of a long-running
  process.

Both ways have the one interface the pipeline uses
(``streamseg.runtime.protocols.SegmenterLike``): ``submit(batch)`` returns a
future of the batch's instances, done at once in this process.

How: :class:`ModelProcess` stands in for the segmenter in the pipeline. A
batch's frames are copied into one shared memory block (grown when a batch
needs more), a small header goes through a pipe, and the worker
(:mod:`streamseg.hosting.worker`) answers with the instances as numpy
arrays (masks as box-local crops, packed in one array). Two batches may be
in flight, each in its own block: the pipeline sends the next batch while
the worker runs one, which hides the round trip. The worker's log records
come back to this process's handlers (redaction included).

Failures reach the caller at once, never as a silent wait:

* an exception in the worker (building the model, warm-up, a batch) is
  raised in the parent as it is (a :class:`streamseg.errors.StartupError`
  keeps its field and fix), or as a ``ModelProcessError`` naming its type
  and message;
* a worker that ends (killed, crashed) is started again at once, with the
  weights last loaded, and the batches it held are sent to the new one:
  nothing is lost. A batch sent twice to workers that both ended fails
  with a ``ModelProcessError`` saying how the last one ended (exit code or
  signal); so does every batch once ``MAX_ENDED_IN_A_ROW`` workers in a
  row ended without answering one (it gives up);
* a worker that answers nothing for ``answer_timeout`` seconds is ended,
  and its batches handled the same way;
* a start that takes long is logged every ``STILL_STARTING_S`` seconds.

Workers are started again after a backoff that grows while they keep
ending without answering a batch (``ModelProcess.health`` shows it).
Hot swap loads new weights in the worker; a refused checkpoint raises in
the parent as it would in process and the old weights stay.
"""
