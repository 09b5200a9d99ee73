"""Live dashboards: changed ids are coalesced after commit, sent as one group event per group,
and each websocket consumer re-reads through the selectors and sends server-rendered fragments
(``hx-swap-oob`` by element id) that htmx's websocket extension swaps into the page."""
