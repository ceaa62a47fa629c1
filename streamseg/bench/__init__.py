"""The benchmarks; first the harness of ``streamseg bench pipeline``, what it runs and measures.

Both of its main runs use the same model (batch size, backend) on the same
recorded clip:

* model-only (:func:`runs.model_only_fps`): the clip's frames decoded into
  memory first, then sent to the model in batches of ``batch_size``;
* end-to-end (:func:`runs.run_end_to_end`): the full pipeline with the clip
  as a file source (decode, batching, segmentation, tracking, JSON/RLE
  encoding, Redis publishing), timed from start to the last Redis
  acknowledgement;
* live (:mod:`streamseg.bench.live`): the pipeline's own cameras, as
  ``serve`` runs them, for a fixed time: per camera, frames/s in and
  processed, the real-time ratio, the frame counters and glass-to-event
  latency.

The goal is ``ratio = e2e_fps / model_fps >= 0.9``: everything but inference
hidden behind it.

With ``--model oracle`` the model is :class:`oracle.OracleSegmenter` (the
synthetic scene's exact instances, no network), so the run times everything
but the model: :func:`report.oracle_summary` reports CPU milliseconds per
frame for each stage (``PipelineStats.cpu_seconds``) and the host path's
frames/s per core. Frames come from an H.264 clip decoded on the CPU, or
from memory (:class:`clips.MemorySource`: decoding costs nothing).

Modules: ``clips`` (frames in), ``runs`` (the timed runs), ``report`` (the
figures), ``redis_server`` (a Redis to publish to), ``live``, ``oracle``.

The other benchmarks live here too, with what only they use, so that no
serving package imports a benchmark or the synthetic scenes they feed on:
``model`` (``bench model``), ``ops`` (``bench ops``), ``dispatch``
(``bench dispatch``) and ``emulated`` (the emulated GPU it counts on),
``publish`` (``python -m streamseg.bench.publish``), ``parity`` and
``versus`` (``scripts/gpu-check.sh``'s parity and timing steps), ``train*``
(``bench train``), ``fleet*`` (``bench fleet``), and the local servers
(``redis_server``, ``mqtt_server``, ``rtsp_server``).
"""
