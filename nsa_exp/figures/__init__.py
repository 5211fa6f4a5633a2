"""The figures (matplotlib, imported only when one is drawn): latency vs fan-in, the sweep, the autotune
heatmap, the model validation; each written as PNG and SVG through :mod:`.canvas`."""
