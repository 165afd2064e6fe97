"""The models dialog and the Qt-free state behind it: the catalog table, downloads, imports, deletions."""
