"""Tables of ops checked by ``test_op_table.py``: one module per area, each exporting ``OPS``."""
