"""The friendly layer: ``App``, ``@app.task`` and its declarations, ``Task``, the canvas of
flows (``chain``, ``group``), and the worker that assembles an app's consumers."""
