"""The wiki as written: page model, front matter, markers, pages, catalog, artifact manifests, schema, check."""
