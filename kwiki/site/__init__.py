"""The static site: staging pages for mkdocs, rendering, charts, listings, exports. Uses verify's data."""
