"""Access control: SASL authentication of connections and ACL authorization of
requests (off by default; see ``install``)."""
