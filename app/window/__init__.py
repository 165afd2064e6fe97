"""The caption window's parts, one concern each, composed by ``app.main_window.MainWindow``.

Each part wires a Qt-free model or the controller to the thin views in ``app.views``; none holds global state,
and everything a part needs is passed to it.
"""
