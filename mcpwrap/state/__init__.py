"""What lives on disk beyond a call: private, atomic files (`durable`) and request-state signing (`signing`)."""
