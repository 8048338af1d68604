"""What agents and scripts read: the page index, query, show, views, the MCP server."""
