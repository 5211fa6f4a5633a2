"""The vocabulary (torch-free, stdlib and numpy only): the Stage table, the routing families, the
protocol's named choices and statistics, the document kinds, the config's typed values and the typed
records. Every other tier reads it; it reads none of them."""
