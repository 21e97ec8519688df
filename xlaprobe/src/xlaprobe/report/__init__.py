"""``xlaprobe report``: one self-contained HTML page from the store.

Data flows one way: `gather` reads the store (and the files it points to) into plain records,
`plots` draws them as SVG embedded in the page, `render` fills the page's template (jinja2 with
autoescape) and writes it atomically.
"""
