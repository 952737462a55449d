"""Kafka's ACLs and its StandardAuthorizer: who may do what to which resource."""
