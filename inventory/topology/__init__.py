"""Fabric topology: templates, checks, cable plans and drawings.

`templates`, `check`, `plan` and `svg` are pure Python (plain data in, dataclasses out). `data` gathers a
fabric from the database in a constant number of queries; `services` writes (fabrics, planned cables).
"""
