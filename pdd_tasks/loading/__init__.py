"""Reading benchmark data: local files, the Hub, packaged copies, Chinese word snippets."""
