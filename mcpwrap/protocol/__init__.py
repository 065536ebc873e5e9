"""Protocol decisions only: messages and state in, actions out. Never imports trio."""
