"""`replog console`: a read-only web page of a running cluster.

Layers, each in its own module: `http` (request and response bytes, no I/O),
`cluster_view` and `rates` (the documents served, from plain values), `cluster_source`,
`scrape` and `lag` (reading ZooKeeper, the brokers and their metrics), `app` (the loops
that keep the documents current, and the routes), `server` (asyncio serving). The page
itself is `static/`: plain HTML, CSS and JavaScript, nothing fetched from elsewhere.
"""
