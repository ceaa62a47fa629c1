"""The web console of ``serve``: live view with overlays, and the change API.

* ``live``: latest-frame slots the pipeline fills only for watched cameras.
* ``overlay``: masks, boxes, labels, trails, zones and lines drawn on a frame.
* ``editor``: validated, comment-keeping edits of pipeline.yaml.
* ``auth``: the ``http.token`` rules.
* ``server``: the pages and the JSON API (aiohttp routes on ``serve``'s server).

docs/console.md describes the page and the API.
"""
