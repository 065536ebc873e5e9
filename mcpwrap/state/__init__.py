"""What lives on disk beyond a call: private, atomic files (`durable`), and the secret that signs request
states and the ledger of the used ones (`signing`)."""
