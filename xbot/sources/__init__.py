"""Where posts come from: X through a chain of sources, other sites through yt-dlp."""
